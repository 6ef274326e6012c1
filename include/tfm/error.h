// tfm::Error — the one error mechanism of the library.
//
// Library code never aborts or exits: a bad shape, a malformed file or an unknown config
// key throws tfm::Error whose message is one line naming where and what:
//   [matmul] (2,3) x (4,5): inner dims 3 != 4
// The CLI catches it, prints the line and exits non-zero.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace tfm {

class Error : public std::runtime_error {
 public:
  Error(std::string where, std::string what);
  const std::string& where() const { return where_; }

 private:
  std::string where_;
};

namespace detail {
template <class... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
}  // namespace detail

// Throws Error("[where] what"), what being the arguments streamed one after another.
template <class... Args>
[[noreturn]] void fail(std::string_view where, const Args&... args) {
  throw Error(std::string(where), detail::concat(args...));
}

// The candidate nearest to `name` by edit distance when it is at most `max_edits` away, else
// "" — for "unknown X 'name' (did you mean 'Y'?)" messages.
std::string closest_name(std::string_view name, const std::vector<std::string>& candidates, std::size_t max_edits = 2);

}  // namespace tfm

// TFM_CHECK(cond, "op", "message ", value, ...): throw tfm::Error when cond is false.
#define TFM_CHECK(cond, where, ...)        \
  do {                                     \
    if (!(cond)) ::tfm::fail(where, __VA_ARGS__); \
  } while (0)
