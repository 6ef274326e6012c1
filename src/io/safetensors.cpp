// safetensors reader/writer (format summary in include/tfm/safetensors.h).
#include "tfm/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "tfm/error.h"

namespace tfm {
namespace {

constexpr std::uint64_t kMaxHeader = 100u << 20;  // the reference implementation's cap (100 MB)

std::uint64_t read_le64(const unsigned char* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

}  // namespace

namespace {

// a * b, or an error when it does not fit in 64 bits.
std::uint64_t checked_mul(std::uint64_t a, std::uint64_t b, const std::string& ctx, const char* what) {
  TFM_CHECK(b == 0 || a <= std::numeric_limits<std::uint64_t>::max() / b, ctx, what, " overflows 64 bits");
  return a * b;
}

// Duplicate keys are legal JSON that parsers resolve differently (first or last wins), so a
// header with one is refused: each object's keys are tracked while it is parsed.
nlohmann::json parse_header(const char* p, std::size_t n, const std::string& ctx) {
  std::vector<std::set<std::string>> open;
  const auto cb = [&](int /*depth*/, nlohmann::json::parse_event_t ev, nlohmann::json& v) {
    using E = nlohmann::json::parse_event_t;
    if (ev == E::object_start) open.emplace_back();
    if (ev == E::object_end && !open.empty()) open.pop_back();
    if (ev == E::key && !open.empty()) {
      const std::string k = v.get<std::string>();
      TFM_CHECK(open.back().insert(k).second, ctx, "header has the key '", k, "' twice (duplicate keys are refused)");
    }
    return true;
  };
  // The reference parser allows trailing spaces as padding, nothing else (NUL padding is refused).
  for (std::size_t i = 0; i < n; ++i)
    TFM_CHECK(p[i] != '\0', ctx, "header contains a NUL byte at offset ", 8 + i, " (only spaces may pad it)");
  TFM_CHECK(n > 0 && p[0] == '{', ctx, "header does not start with '{'");
  try {
    return nlohmann::json::parse(p, p + n, cb);
  } catch (const nlohmann::json::exception& e) {
    fail(ctx, "header is not valid JSON: ", e.what());
  }
}

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  std::uint64_t begin, end;
};

// Parses the header of the bytes [data, data + size) and builds tensors viewing `storage`
// (which holds the data section) where the element is aligned, copies elsewhere.
SafetensorsFile parse_view(const char* data, std::size_t size, const std::string& where,
                           const std::function<std::shared_ptr<Storage>(std::size_t, std::size_t)>& data_storage) {
  const std::string ctx = "safetensors " + where;
  TFM_CHECK(size >= 8, ctx, "file is ", size, " bytes, too short for the 8-byte header length");
  const std::uint64_t n = read_le64(reinterpret_cast<const unsigned char*>(data));
  TFM_CHECK(n <= kMaxHeader, ctx, "header length ", n, " exceeds the 100 MB limit");
  TFM_CHECK(n <= size - 8, ctx, "header length ", n, " runs past the end of the file (", size, " bytes)");
  const nlohmann::json header = parse_header(data + 8, static_cast<std::size_t>(n), ctx);
  TFM_CHECK(header.is_object(), ctx, "header is not a JSON object");
  const std::size_t data_begin = 8 + static_cast<std::size_t>(n);
  const std::size_t data_size = size - data_begin;

  SafetensorsFile out;
  std::vector<Entry> entries;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const auto& v = it.value();
    if (name == "__metadata__") {
      TFM_CHECK(v.is_object(), ctx, "__metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        TFM_CHECK(m.value().is_string(), ctx, "metadata value for '", m.key(), "' is not a string");
        out.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string tctx = ctx + " tensor '" + name + "'";
    TFM_CHECK(v.is_object() && v.contains("dtype") && v.contains("shape") && v.contains("data_offsets"), tctx,
              "entry needs dtype, shape and data_offsets");
    for (auto f = v.begin(); f != v.end(); ++f)
      TFM_CHECK(f.key() == "dtype" || f.key() == "shape" || f.key() == "data_offsets", tctx, "unknown field '",
                f.key(), "' (allowed: dtype, shape, data_offsets)");
    TFM_CHECK(v["dtype"].is_string(), tctx, "dtype is not a string");
    Entry e{name, DType::f32, {}, 0, 0};
    try {
      e.dtype = dtype_from_name(v["dtype"].get<std::string>());
    } catch (const Error&) {
      fail(tctx, "unknown dtype '", v["dtype"].get<std::string>(), "' (allowed: F32, F16, BF16, I64, I32, I8, U8)");
    }
    TFM_CHECK(v["shape"].is_array(), tctx, "shape is not an array");
    std::uint64_t count = 1;
    for (const auto& s : v["shape"]) {
      TFM_CHECK(s.is_number_unsigned(), tctx, "shape entry ", s.dump(), " is not a non-negative integer");
      const std::uint64_t d = s.get<std::uint64_t>();
      TFM_CHECK(d <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()), tctx, "shape entry ", d,
                " is too large");
      count = checked_mul(count, d, tctx, "the element count");
      e.shape.push_back(static_cast<std::int64_t>(d));
    }
    const std::uint64_t bytes = checked_mul(count, dtype_size(e.dtype), tctx, "the byte size");
    const auto& off = v["data_offsets"];
    TFM_CHECK(off.is_array() && off.size() == 2 && off[0].is_number_unsigned() && off[1].is_number_unsigned(),
              tctx, "data_offsets must be [begin, end]");
    e.begin = off[0].get<std::uint64_t>();
    e.end = off[1].get<std::uint64_t>();
    TFM_CHECK(e.begin <= e.end && e.end <= data_size, tctx, "data_offsets [", e.begin, ", ", e.end, "] outside the ",
              data_size, "-byte data section");
    TFM_CHECK(e.end - e.begin == bytes, tctx, "shape ", shape_str(e.shape), " of ", dtype_name(e.dtype), " needs ",
              bytes, " bytes, data_offsets give ", e.end - e.begin);
    entries.push_back(std::move(e));
  }
  // As the reference parser: the tensors tile the data section exactly, in offset order, so
  // no byte is shared by two tensors, none is skipped and none follows the last (a polyglot
  // file hides a second payload there).
  std::vector<const Entry*> order;
  for (const auto& e : entries) order.push_back(&e);
  std::stable_sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  std::uint64_t at = 0;
  for (const Entry* e : order) {
    const std::string tctx = ctx + " tensor '" + e->name + "'";
    TFM_CHECK(e->begin >= at, tctx, "data_offsets [", e->begin, ", ", e->end, "] overlap the previous tensor's bytes (which end at ", at, ")");
    TFM_CHECK(e->begin == at, tctx, "data_offsets [", e->begin, ", ", e->end, "] leave a gap of ", e->begin - at,
              " bytes after the previous tensor");
    at = e->end;
  }
  TFM_CHECK(at == data_size, ctx, data_size - at, " bytes follow the last tensor (the data section is ", data_size,
            " bytes, tensors cover ", at, ")");

  const std::shared_ptr<Storage> storage = data_storage(data_begin, data_size);
  const auto base = reinterpret_cast<std::uintptr_t>(storage->data());
  for (const auto& e : entries) {
    const std::size_t esz = dtype_size(e.dtype);
    if ((base + e.begin) % esz == 0) {
      out.tensors[e.name] = Tensor::from_storage(storage, e.shape, e.dtype, static_cast<std::int64_t>(e.begin / esz));
    } else {  // unaligned for its dtype: copy out
      Tensor t = Tensor::empty(e.shape, e.dtype);
      if (e.end > e.begin) std::memcpy(t.raw_data(), static_cast<const char*>(storage->data()) + e.begin, e.end - e.begin);
      out.tensors[e.name] = t;
    }
  }
  return out;
}

// A private, copy-on-write mapping of a whole file: tensors view it without a copy, and a
// write into one (training, in-place ops) copies that page only, never touching the file.
struct Mapping {
  void* addr = nullptr;
  std::size_t size = 0;
  ~Mapping() {
    if (addr != nullptr) ::munmap(addr, size);
  }
};

}  // namespace

SafetensorsFile parse_safetensors(const std::string& bytes, const std::string& where) {
  return parse_view(bytes.data(), bytes.size(), where, [&](std::size_t begin, std::size_t size) {
    auto storage = std::make_shared<Storage>(size);  // one buffer for all tensors
    if (size) std::memcpy(storage->data(), bytes.data() + begin, size);
    return storage;
  });
}

SafetensorsFile load_safetensors(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  TFM_CHECK(fd >= 0, path, "cannot open: ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, "not a regular file");
  }
  auto map = std::make_shared<Mapping>();
  map->size = static_cast<std::size_t>(st.st_size);
  if (map->size > 0) {
    void* a = ::mmap(nullptr, map->size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    const int err = errno;
    ::close(fd);
    TFM_CHECK(a != MAP_FAILED, path, "cannot map: ", std::strerror(err));
    map->addr = a;
  } else {
    ::close(fd);
  }
  const char* p = static_cast<const char*>(map->addr);
  return parse_view(p, map->size, path, [&](std::size_t begin, std::size_t size) {
    return std::make_shared<Storage>(const_cast<char*>(p) + begin, size, map, true);
  });
}

std::string serialize_safetensors(const std::map<std::string, Tensor>& tensors,
                                  const std::map<std::string, std::string>& metadata) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    TFM_CHECK(t.defined(), "safetensors", "tensor '", name, "' is undefined");
    TFM_CHECK(name != "__metadata__", "safetensors", "'__metadata__' is reserved");
    header[name] = {{"dtype", dtype_safetensors_name(t.dtype())},
                    {"shape", t.shape()},
                    {"data_offsets", {offset, offset + t.nbytes()}}};
    offset += t.nbytes();
  }
  std::string h = header.dump();
  h.append((8 - (h.size() % 8)) % 8, ' ');  // pad so the data section starts 8-aligned
  std::string out;
  out.reserve(8 + h.size() + offset);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((h.size() >> (8 * i)) & 0xff));
  out += h;
  for (const auto& [name, t] : tensors) {
    const Tensor c = t.is_contiguous() ? t : t.clone();
    out.append(static_cast<const char*>(c.raw_data()), c.nbytes());
  }
  return out;
}

std::map<std::string, std::vector<std::string>> read_safetensors_index(const std::string& index_path) {
  nlohmann::json idx;
  try {
    idx = nlohmann::json::parse(read_file(index_path));
  } catch (const nlohmann::json::exception& e) {
    fail(index_path, "not valid JSON: ", e.what());
  }
  TFM_CHECK(idx.is_object() && idx.contains("weight_map") && idx["weight_map"].is_object(), index_path,
            "needs an object \"weight_map\": {tensor name: shard file}");
  std::map<std::string, std::vector<std::string>> shards;  // file -> tensor names
  for (auto it = idx["weight_map"].begin(); it != idx["weight_map"].end(); ++it) {
    TFM_CHECK(it.value().is_string(), index_path, "weight_map entry '", it.key(), "' is not a file name");
    const std::string f = it.value().get<std::string>();
    TFM_CHECK(!f.empty() && f.find('/') == std::string::npos && f.find('\\') == std::string::npos && f != "." &&
                  f != "..",
              index_path, "weight_map entry '", it.key(), "' names '", f, "', not a file of this directory");
    shards[f].push_back(it.key());
  }
  TFM_CHECK(!shards.empty(), index_path, "weight_map is empty");
  return shards;
}

void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  write_file_atomic(path, serialize_safetensors(tensors, metadata));
}

}  // namespace tfm
