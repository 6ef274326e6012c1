// Plain values, strings and vectors appended to a byte string and read back, checked: the
// records rank 0 hands the other ranks of a model split over processes (lockstep.cpp,
// model_jobs.cpp). Both ends are the same build on the same kind of machine, so values travel
// in their native layout.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tfm/error.h"

namespace tfm::server::bytes {

template <class T>
void put(std::string& out, T v) {
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}
inline void put_string(std::string& out, const std::string& s) {
  put<std::uint64_t>(out, s.size());
  out += s;
}
inline void put_strings(std::string& out, const std::vector<std::string>& v) {
  put<std::uint64_t>(out, v.size());
  for (const std::string& s : v) put_string(out, s);
}

// A vector of plain values (floats, doubles, bytes) as its length and raw contents.
template <class T>
void put_values(std::string& out, const std::vector<T>& v) {
  put<std::uint64_t>(out, v.size());
  out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}
inline void put_ids(std::string& out, const std::vector<std::int32_t>& ids) { put_values(out, ids); }

inline void need(const std::string& in, std::size_t at, std::uint64_t n) {
  TFM_CHECK(at <= in.size() && n <= in.size() - at, "serve", "a lockstep record from rank 0 is cut short");
}
template <class T>
T get(const std::string& in, std::size_t& at) {
  need(in, at, sizeof(T));
  T v;
  std::memcpy(&v, in.data() + at, sizeof v);
  at += sizeof v;
  return v;
}
inline std::string get_string(const std::string& in, std::size_t& at) {
  const auto n = get<std::uint64_t>(in, at);
  need(in, at, n);
  std::string s = in.substr(at, n);
  at += n;
  return s;
}
inline std::vector<std::string> get_strings(const std::string& in, std::size_t& at) {
  const auto n = get<std::uint64_t>(in, at);
  need(in, at, n * sizeof(std::uint64_t));  // each at least its length
  std::vector<std::string> v(n);
  for (std::string& s : v) s = get_string(in, at);
  return v;
}
template <class T>
std::vector<T> get_values(const std::string& in, std::size_t& at) {
  const auto n = get<std::uint64_t>(in, at);
  TFM_CHECK(n <= (in.size() - std::min(at, in.size())) / sizeof(T), "serve", "a lockstep record from rank 0 is cut short");
  std::vector<T> v(n);
  std::memcpy(v.data(), in.data() + at, n * sizeof(T));
  at += n * sizeof(T);
  return v;
}
inline std::vector<std::int32_t> get_ids(const std::string& in, std::size_t& at) { return get_values<std::int32_t>(in, at); }

}  // namespace tfm::server::bytes
