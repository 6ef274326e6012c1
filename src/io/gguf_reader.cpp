// GGUF reader (format in include/tfm/gguf.h). Every count, length, offset and product read
// from the file is checked, with overflow-checked arithmetic, against what is left of the
// file before anything is allocated or read: a hostile header cannot make the reader
// allocate more than the file's size or read outside it.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <set>

#include "io/gguf_types.h"
#include "kernels/parallel.h"
#include "kernels/quant_blocks.h"
#include "tfm/error.h"
#include "tfm/gguf.h"

namespace tfm {
namespace {

constexpr std::uint64_t kMaxKeyBytes = 65535;    // the spec's limit for keys
constexpr std::uint64_t kMaxNameBytes = 63;      // GGML_MAX_NAME - 1 (llama.cpp's limit)
constexpr std::uint32_t kMaxDims = 4;            // GGML_MAX_DIMS
constexpr std::uint64_t kMaxElements = 1ull << 50;

// A bounds-checked cursor over the header bytes.
class Cursor {
 public:
  Cursor(const unsigned char* p, std::uint64_t size, const std::string& where) : p_(p), size_(size), where_(where) {}
  std::uint64_t pos() const { return pos_; }
  std::uint64_t left() const { return size_ - pos_; }
  void need(std::uint64_t n, const std::string& what) const {
    TFM_CHECK(n <= left(), where_, what, ": needs ", n, " bytes at offset ", pos_, " but the file has ", left(),
              " left");
  }
  template <class T>
  T get(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));  // little-endian hosts only (x86-64, arm64)
    pos_ += sizeof(T);
    return v;
  }
  std::string string(const std::string& what, std::uint64_t max_len) {
    const auto n = get<std::uint64_t>(what + " length");
    TFM_CHECK(n <= max_len, where_, what, ": length ", n, " exceeds the limit of ", max_len, " bytes");
    need(n, what);
    std::string s(reinterpret_cast<const char*>(p_ + pos_), n);
    pos_ += n;
    return s;
  }

 private:
  const unsigned char* p_;
  std::uint64_t size_, pos_ = 0;
  const std::string& where_;
};

std::uint64_t checked_mul(std::uint64_t a, std::uint64_t b, const std::string& where, const std::string& what) {
  std::uint64_t r = 0;
  TFM_CHECK(!__builtin_mul_overflow(a, b, &r), where, what, ": ", a, " x ", b, " overflows 64 bits");
  return r;
}
std::uint64_t checked_add(std::uint64_t a, std::uint64_t b, const std::string& where, const std::string& what) {
  std::uint64_t r = 0;
  TFM_CHECK(!__builtin_add_overflow(a, b, &r), where, what, ": ", a, " + ", b, " overflows 64 bits");
  return r;
}

bool valid_value_type(std::uint32_t t) { return t <= static_cast<std::uint32_t>(GgufValueType::f64); }

std::int64_t read_integer(Cursor& c, GgufValueType t, const std::string& where, const std::string& what) {
  switch (t) {
    case GgufValueType::u8: return c.get<std::uint8_t>(what);
    case GgufValueType::i8: return c.get<std::int8_t>(what);
    case GgufValueType::u16: return c.get<std::uint16_t>(what);
    case GgufValueType::i16: return c.get<std::int16_t>(what);
    case GgufValueType::u32: return c.get<std::uint32_t>(what);
    case GgufValueType::i32: return c.get<std::int32_t>(what);
    case GgufValueType::i64: return c.get<std::int64_t>(what);
    case GgufValueType::u64: {
      const auto v = c.get<std::uint64_t>(what);
      TFM_CHECK(v <= static_cast<std::uint64_t>(INT64_MAX), where, what, ": u64 value ", v, " exceeds 2^63 - 1");
      return static_cast<std::int64_t>(v);
    }
    case GgufValueType::boolean: {
      const auto b = c.get<std::uint8_t>(what);
      TFM_CHECK(b <= 1, where, what, ": bool byte is ", int(b), ", must be 0 or 1");
      return b;
    }
    default: fail(where, what, ": not an integer type");
  }
}

bool is_float(GgufValueType t) { return t == GgufValueType::f32 || t == GgufValueType::f64; }
double read_float(Cursor& c, GgufValueType t, const std::string& what) {
  return t == GgufValueType::f32 ? static_cast<double>(c.get<float>(what)) : c.get<double>(what);
}

GgufValue read_value(Cursor& c, const std::string& where, const std::string& key) {
  const std::string what = "key '" + key + "'";
  const auto raw_type = c.get<std::uint32_t>(what + " type");
  TFM_CHECK(valid_value_type(raw_type), where, what, ": unknown value type ", raw_type);
  GgufValue v;
  v.type = static_cast<GgufValueType>(raw_type);
  if (v.type == GgufValueType::string) {
    v.s = c.string(what, c.left());
  } else if (is_float(v.type)) {
    v.f = read_float(c, v.type, what);
  } else if (v.type != GgufValueType::array) {
    v.i = read_integer(c, v.type, where, what);
  } else {
    const auto raw_elem = c.get<std::uint32_t>(what + " array type");
    TFM_CHECK(valid_value_type(raw_elem), where, what, ": unknown array element type ", raw_elem);
    v.array_type = static_cast<GgufValueType>(raw_elem);
    TFM_CHECK(v.array_type != GgufValueType::array, where, what, ": nested arrays are not supported");
    const auto n = c.get<std::uint64_t>(what + " array length");
    // Every element takes at least its fixed size (8 bytes for a string's length), so a
    // count the rest of the file cannot hold is refused before anything is reserved.
    const std::uint64_t min_elem = v.array_type == GgufValueType::string ? 8 : gguf_scalar_size(v.array_type);
    TFM_CHECK(n <= c.left() / min_elem, where, what, ": array of ", n, " ", gguf_value_type_name(v.array_type),
              " values cannot fit in the ", c.left(), " bytes left in the file");
    if (v.array_type == GgufValueType::string) {
      v.strings.reserve(n);
      for (std::uint64_t k = 0; k < n; ++k) v.strings.push_back(c.string(what + "[" + std::to_string(k) + "]", c.left()));
    } else if (is_float(v.array_type)) {
      v.floats.reserve(n);
      for (std::uint64_t k = 0; k < n; ++k) v.floats.push_back(read_float(c, v.array_type, what));
    } else {
      v.ints.reserve(n);
      for (std::uint64_t k = 0; k < n; ++k) v.ints.push_back(read_integer(c, v.array_type, where, what));
    }
  }
  return v;
}

GgufTensorInfo read_tensor_info(Cursor& c, const std::string& where, std::uint64_t index) {
  GgufTensorInfo t;
  t.name = c.string("tensor #" + std::to_string(index) + " name", kMaxNameBytes);
  const std::string what = "tensor '" + t.name + "'";
  const auto n_dims = c.get<std::uint32_t>(what + " n_dims");
  TFM_CHECK(n_dims >= 1 && n_dims <= kMaxDims, where, what, ": n_dims ", n_dims, " outside [1, ", kMaxDims, "]");
  std::uint64_t numel = 1;
  for (std::uint32_t d = 0; d < n_dims; ++d) {
    const auto ne = c.get<std::uint64_t>(what + " ne");
    TFM_CHECK(ne >= 1 && ne <= kMaxElements, where, what, ": ne[", d, "] = ", ne, " outside [1, 2^50]");
    numel = checked_mul(numel, ne, where, what + " element count");
    TFM_CHECK(numel <= kMaxElements, where, what, ": ", numel, " elements exceed 2^50");
    t.ne.push_back(static_cast<std::int64_t>(ne));
  }
  t.type = c.get<std::uint32_t>(what + " type");
  const GgmlTypeTraits* tr = ggml_traits(t.type);
  TFM_CHECK(tr != nullptr, where, what, ": tensor type ", ggml_type_name(t.type),
            " is not supported (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q4_K, Q5_K, Q6_K)");
  TFM_CHECK(static_cast<std::uint64_t>(t.ne[0]) % tr->block == 0, where, what, ": row length ne[0] = ", t.ne[0],
            " is not a multiple of ", ggml_type_name(t.type), "'s block of ", tr->block);
  t.nbytes = checked_mul(numel / tr->block, tr->bytes, where, what + " byte size");
  t.offset = c.get<std::uint64_t>(what + " offset");
  return t;
}

// The file's bytes: a read-only private mapping (nothing is copied until a tensor is used).
std::shared_ptr<const unsigned char> map_file(const std::string& path, std::uint64_t& size) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  TFM_CHECK(fd >= 0, path, "cannot open: ", std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail(path, "not a regular file");
  }
  size = static_cast<std::uint64_t>(st.st_size);
  if (size == 0) {
    ::close(fd);
    fail(path, "file is empty (0 bytes), not a GGUF file");
  }
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);
  TFM_CHECK(p != MAP_FAILED, path, "mmap failed: ", std::strerror(err));
  ::madvise(p, size, MADV_WILLNEED);  // a model load reads the whole file: start the read-ahead now
  const std::uint64_t len = size;
  return std::shared_ptr<const unsigned char>(static_cast<const unsigned char*>(p),
                                              [len](const unsigned char* q) { ::munmap(const_cast<unsigned char*>(q), len); });
}

GgufFile parse(std::shared_ptr<const unsigned char> bytes, std::uint64_t size, const std::string& where) {
  Cursor c(bytes.get(), size, where);
  c.need(4, "magic");
  TFM_CHECK(std::memcmp(bytes.get(), "GGUF", 4) == 0, where, "not a GGUF file (magic is not \"GGUF\")");
  c.get<std::uint32_t>("magic");
  GgufFile f;
  f.path = where;
  f.file_size = size;
  f.version = c.get<std::uint32_t>("version");
  TFM_CHECK(f.version != 1, where, "GGUF version 1 is not supported (only 2 and 3)");
  TFM_CHECK(f.version != 0x02000000u && f.version != 0x03000000u, where,
            "big-endian GGUF files are not supported");
  TFM_CHECK(f.version == 2 || f.version == 3, where, "unknown GGUF version ", f.version, " (supported: 2, 3)");
  const auto n_tensors = c.get<std::uint64_t>("tensor count");
  const auto n_kv = c.get<std::uint64_t>("metadata count");
  // A key-value pair takes at least 8 (key length) + 4 (type) + 1 bytes; a tensor info at
  // least 8 + 4 + 8 + 4 + 8.
  TFM_CHECK(n_kv <= c.left() / 13, where, "metadata count ", n_kv, " cannot fit in the ", c.left(),
            " bytes of the file");
  TFM_CHECK(n_tensors <= c.left() / 32, where, "tensor count ", n_tensors, " cannot fit in the ", c.left(),
            " bytes of the file");
  std::set<std::string> keys;
  f.metadata.reserve(n_kv);
  for (std::uint64_t k = 0; k < n_kv; ++k) {
    std::string key = c.string("metadata key #" + std::to_string(k), kMaxKeyBytes);
    TFM_CHECK(keys.insert(key).second, where, "key '", key, "' appears twice");
    GgufValue v = read_value(c, where, key);
    f.metadata.emplace_back(std::move(key), std::move(v));
  }
  if (const GgufValue* a = f.find("general.alignment")) {
    TFM_CHECK(a->type == GgufValueType::u32, where, "key 'general.alignment' must be u32, got ",
              gguf_value_type_name(a->type));
    TFM_CHECK(a->i > 0 && (a->i & (a->i - 1)) == 0, where, "key 'general.alignment' = ", a->i,
              " is not a power of two");
    f.alignment = static_cast<std::uint64_t>(a->i);
  }
  std::set<std::string> names;
  f.tensors.reserve(n_tensors);
  for (std::uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensorInfo t = read_tensor_info(c, where, k);
    TFM_CHECK(names.insert(t.name).second, where, "tensor '", t.name, "' appears twice");
    f.tensors.push_back(std::move(t));
  }
  const std::uint64_t pad = (f.alignment - c.pos() % f.alignment) % f.alignment;
  f.data_offset = checked_add(c.pos(), pad, where, "data section offset");
  TFM_CHECK(f.data_offset <= size, where, "data section starts at ", f.data_offset, ", past the end of the file (",
            size, " bytes)");
  const std::uint64_t data_size = size - f.data_offset;
  for (const auto& t : f.tensors) {
    TFM_CHECK(t.offset % f.alignment == 0, where, "tensor '", t.name, "': offset ", t.offset,
              " is not a multiple of the alignment ", f.alignment);
    const std::uint64_t end = checked_add(t.offset, t.nbytes, where, "tensor '" + t.name + "' end");
    TFM_CHECK(end <= data_size, where, "tensor '", t.name, "': bytes [", t.offset, ", ", end,
              ") run past the end of the ", data_size, "-byte data section");
  }
  f.bytes = std::move(bytes);
  return f;
}

}  // namespace

GgufFile read_gguf(const std::string& path) {
  std::uint64_t size = 0;
  auto bytes = map_file(path, size);
  GgufFile f = parse(std::move(bytes), size, path);
  f.mapped = true;
  return f;
}

GgufFile parse_gguf(std::string bytes, const std::string& where) {
  auto owner = std::make_shared<std::string>(std::move(bytes));
  const std::uint64_t size = owner->size();
  std::shared_ptr<const unsigned char> view(owner, reinterpret_cast<const unsigned char*>(owner->data()));
  return parse(std::move(view), size, where);
}

const unsigned char* GgufFile::raw(const GgufTensorInfo& t) const { return bytes.get() + data_offset + t.offset; }

void GgufFile::release(const GgufTensorInfo& t) const {
  if (!mapped || t.nbytes == 0) return;
  const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
  const std::uint64_t begin = (data_offset + t.offset + page - 1) / page * page;  // whole pages inside the tensor
  const std::uint64_t end = (data_offset + t.offset + t.nbytes) / page * page;
  if (begin < end) ::madvise(const_cast<unsigned char*>(bytes.get()) + begin, end - begin, MADV_DONTNEED);
}

Tensor GgufFile::to_f32(const GgufTensorInfo& t) const {
  Tensor out = Tensor::empty(t.shape(), DType::f32);
  const GgmlTypeTraits* tr = ggml_traits(t.type);
  TFM_CHECK(tr != nullptr, path, "tensor '", t.name, "': unsupported type ", ggml_type_name(t.type));
  // Blocks are independent: dequantize contiguous runs of them on the engine's threads.
  const auto blocks = static_cast<std::int64_t>(static_cast<std::uint64_t>(t.numel()) / tr->block);
  const auto block = static_cast<std::int64_t>(tr->block), block_bytes = static_cast<std::int64_t>(tr->bytes);
  const unsigned char* src = raw(t);
  float* dst = out.data<float>();
  kernels::parallel_for(blocks, std::max<std::int64_t>(1, (1 << 16) / block), [&](std::int64_t b0, std::int64_t b1) {
    tr->to_f32(src + b0 * block_bytes, dst + b0 * block, (b1 - b0) * block);
  });
  return out;
}

}  // namespace tfm
