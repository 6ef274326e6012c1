// GGUF v3 writer: header and tensor infos first, then each tensor converted to its file
// type and streamed out (a model is never held twice in memory). Written to a temp file
// in the same directory, fsynced and renamed, like every writer of the engine.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>

#include "io/gguf_types.h"
#include "kernels/qgemm.h"
#include "kernels/quant_blocks.h"
#include "tfm/error.h"
#include "tfm/gguf.h"

namespace tfm {
namespace {

class Sink {
 public:
  Sink(const std::string& path, const std::string& tmp) : path_(path), tmp_(tmp) {
    fd_ = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    TFM_CHECK(fd_ >= 0, path, "cannot create ", tmp, ": ", std::strerror(errno));
  }
  ~Sink() {
    if (fd_ >= 0) {
      ::close(fd_);
      ::unlink(tmp_.c_str());
    }
  }
  Sink(const Sink&) = delete;
  Sink& operator=(const Sink&) = delete;

  void bytes(const void* p, std::size_t n) {
    buf_.append(static_cast<const char*>(p), n);
    written_ += n;
    if (buf_.size() >= (8u << 20)) flush();
  }
  template <class T>
  void put(T v) { bytes(&v, sizeof v); }
  void str(const std::string& s) {
    put<std::uint64_t>(s.size());
    bytes(s.data(), s.size());
  }
  void pad_to(std::uint64_t alignment) {
    static const char zeros[256] = {};
    std::uint64_t n = (alignment - written_ % alignment) % alignment;
    while (n > 0) {
      const std::size_t k = n > sizeof zeros ? sizeof zeros : static_cast<std::size_t>(n);
      bytes(zeros, k);
      n -= k;
    }
  }
  std::uint64_t written() const { return written_; }

  void commit() {
    flush();
    if (::fsync(fd_) != 0 || ::close(fd_) != 0) {
      const int err = errno;
      fd_ = -1;
      ::unlink(tmp_.c_str());
      fail(path_, "fsync/close failed: ", std::strerror(err));
    }
    fd_ = -1;
    if (::rename(tmp_.c_str(), path_.c_str()) != 0) {
      const int err = errno;
      ::unlink(tmp_.c_str());
      fail(path_, "rename failed: ", std::strerror(err));
    }
  }

 private:
  void flush() {
    std::size_t done = 0;
    while (done < buf_.size()) {
      const ssize_t w = ::write(fd_, buf_.data() + done, buf_.size() - done);
      if (w < 0 && errno == EINTR) continue;
      TFM_CHECK(w > 0, path_, "write failed: ", std::strerror(errno));
      done += static_cast<std::size_t>(w);
    }
    buf_.clear();
  }
  std::string path_, tmp_;
  int fd_ = -1;
  std::string buf_;
  std::uint64_t written_ = 0;
};

void write_scalar(Sink& s, GgufValueType t, const GgufValue& v, std::size_t k) {
  switch (t) {
    case GgufValueType::u8: s.put<std::uint8_t>(static_cast<std::uint8_t>(v.ints.empty() ? v.i : v.ints[k])); break;
    case GgufValueType::i8: s.put<std::int8_t>(static_cast<std::int8_t>(v.ints.empty() ? v.i : v.ints[k])); break;
    case GgufValueType::u16: s.put<std::uint16_t>(static_cast<std::uint16_t>(v.ints.empty() ? v.i : v.ints[k])); break;
    case GgufValueType::i16: s.put<std::int16_t>(static_cast<std::int16_t>(v.ints.empty() ? v.i : v.ints[k])); break;
    case GgufValueType::u32: s.put<std::uint32_t>(static_cast<std::uint32_t>(v.ints.empty() ? v.i : v.ints[k])); break;
    case GgufValueType::i32: s.put<std::int32_t>(static_cast<std::int32_t>(v.ints.empty() ? v.i : v.ints[k])); break;
    case GgufValueType::u64: s.put<std::uint64_t>(static_cast<std::uint64_t>(v.ints.empty() ? v.i : v.ints[k])); break;
    case GgufValueType::i64: s.put<std::int64_t>(v.ints.empty() ? v.i : v.ints[k]); break;
    case GgufValueType::boolean: s.put<std::uint8_t>((v.ints.empty() ? v.i : v.ints[k]) != 0); break;
    case GgufValueType::f32: s.put<float>(static_cast<float>(v.floats.empty() ? v.f : v.floats[k])); break;
    case GgufValueType::f64: s.put<double>(v.floats.empty() ? v.f : v.floats[k]); break;
    case GgufValueType::string: s.str(v.strings.empty() ? v.s : v.strings[k]); break;
    case GgufValueType::array: fail("gguf", "nested arrays are not written");
  }
}

void write_value(Sink& s, const GgufValue& v) {
  s.put<std::uint32_t>(static_cast<std::uint32_t>(v.type));
  if (v.type != GgufValueType::array) {
    write_scalar(s, v.type, v, 0);
    return;
  }
  s.put<std::uint32_t>(static_cast<std::uint32_t>(v.array_type));
  const std::size_t n = v.array_type == GgufValueType::string ? v.strings.size()
                        : (v.array_type == GgufValueType::f32 || v.array_type == GgufValueType::f64) ? v.floats.size()
                                                                                                       : v.ints.size();
  s.put<std::uint64_t>(n);
  for (std::size_t k = 0; k < n; ++k) write_scalar(s, v.array_type, v, k);
}

std::uint64_t encoded_bytes(const GgufTensorOut& t, const std::string& path) {
  const GgmlTypeTraits* tr = ggml_traits(static_cast<std::uint32_t>(t.type));
  TFM_CHECK(tr != nullptr && (t.type == GgmlType::f32 || t.type == GgmlType::f16 || t.type == GgmlType::bf16 ||
                              t.type == GgmlType::q8_0 || t.type == GgmlType::q4_0 || t.type == GgmlType::q4_k ||
                              t.type == GgmlType::q6_k),
            path, "tensor '", t.name, "': the writer encodes F32, F16, BF16, Q8_0, Q4_0, Q4_K and Q6_K, not ",
            ggml_type_name(static_cast<std::uint32_t>(t.type)));
  TFM_CHECK(!dtype_is_block(t.data.dtype()) || ggml_type_of(t.data.dtype()) == t.type, path, "tensor '", t.name,
            "' is held as ", dtype_name(t.data.dtype()), " and cannot be re-encoded as ",
            ggml_type_name(static_cast<std::uint32_t>(t.type)), " (dequantize it first)");
  const std::int64_t inner = t.data.dim() == 0 ? 1 : t.data.size(-1);
  TFM_CHECK(inner % static_cast<std::int64_t>(tr->block) == 0, path, "tensor '", t.name, "': row length ", inner,
            " is not a multiple of ", tr->name, "'s block of ", tr->block);
  return static_cast<std::uint64_t>(t.data.numel()) / tr->block * tr->bytes;
}

void write_tensor_data(Sink& s, const GgufTensorOut& t) {
  if (dtype_is_block(t.data.dtype())) {  // already in the file's encoding: the blocks as they are
    const Tensor c = t.data.is_contiguous() ? t.data : t.data.clone();
    s.bytes(c.raw_data(), c.nbytes());
    return;
  }
  const std::vector<float> v = t.data.to_floats();
  const auto n = static_cast<std::int64_t>(v.size());
  switch (t.type) {
    case GgmlType::f32: s.bytes(v.data(), v.size() * sizeof(float)); break;
    case GgmlType::f16:
      for (float x : v) s.put<std::uint16_t>(f32_to_f16(x));
      break;
    case GgmlType::bf16:
      for (float x : v) s.put<std::uint16_t>(f32_to_bf16(x));
      break;
    case GgmlType::q8_0: {
      for (float x : v)  // a block's scale is max|x| / 127: NaN or Inf has no encoding
        TFM_CHECK(std::isfinite(x), "gguf", "tensor '", t.name, "' holds ", x, ", which Q8_0 cannot encode");
      std::string blocks(static_cast<std::size_t>(n / kernels::kQK) * sizeof(kernels::BlockQ8_0), '\0');
      kernels::quantize_q8_0(v.data(), blocks.data(), n);
      s.bytes(blocks.data(), blocks.size());
      break;
    }
    case GgmlType::q4_0: case GgmlType::q4_k: case GgmlType::q6_k: {
      for (float x : v)
        TFM_CHECK(std::isfinite(x), "gguf", "tensor '", t.name, "' holds ", x, ", which ",
                  ggml_type_name(static_cast<std::uint32_t>(t.type)), " cannot encode");
      const DType d = t.type == GgmlType::q4_0 ? DType::q4_0 : t.type == GgmlType::q4_k ? DType::q4_k : DType::q6_k;
      const std::int64_t inner = t.data.dim() == 0 ? 1 : t.data.size(-1);
      std::string blocks(static_cast<std::size_t>(n / inner) * dtype_row_bytes(d, inner), '\0');
      kernels::quantize_rows(d, v.data(), blocks.data(), n / inner, inner);
      s.bytes(blocks.data(), blocks.size());
      break;
    }
    default: fail("gguf", "unreachable tensor type");
  }
}

}  // namespace

void write_gguf(const std::string& path, const std::vector<std::pair<std::string, GgufValue>>& metadata,
                const std::vector<GgufTensorOut>& tensors, std::uint64_t alignment) {
  TFM_CHECK(alignment > 0 && (alignment & (alignment - 1)) == 0, path, "alignment ", alignment,
            " is not a power of two");
  std::set<std::string> seen;
  for (const auto& [k, v] : metadata) {
    TFM_CHECK(seen.insert(k).second, path, "metadata key '", k, "' given twice");
    TFM_CHECK(k != "general.alignment", path, "general.alignment is written from the alignment argument");
  }
  seen.clear();
  std::vector<std::uint64_t> sizes;
  for (const auto& t : tensors) {
    TFM_CHECK(t.data.defined(), path, "tensor '", t.name, "' is undefined");
    TFM_CHECK(seen.insert(t.name).second, path, "tensor '", t.name, "' given twice");
    TFM_CHECK(!t.name.empty() && t.name.size() <= 63, path, "tensor name '", t.name, "' must be 1 to 63 bytes");
    TFM_CHECK(t.data.dim() >= 1 && t.data.dim() <= 4, path, "tensor '", t.name, "' has ", t.data.dim(),
              " dimensions (GGUF holds 1 to 4)");
    sizes.push_back(encoded_bytes(t, path));
  }
  Sink s(path, path + ".tmp." + std::to_string(::getpid()));
  s.bytes("GGUF", 4);
  s.put<std::uint32_t>(3);
  s.put<std::uint64_t>(tensors.size());
  s.put<std::uint64_t>(metadata.size() + (alignment != 32 ? 1 : 0));
  for (const auto& [k, v] : metadata) {
    s.str(k);
    write_value(s, v);
  }
  if (alignment != 32) {
    s.str("general.alignment");
    write_value(s, GgufValue::u32(static_cast<std::uint32_t>(alignment)));
  }
  std::uint64_t offset = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& t = tensors[i];
    s.str(t.name);
    s.put<std::uint32_t>(static_cast<std::uint32_t>(t.data.dim()));
    for (std::int64_t d = t.data.dim() - 1; d >= 0; --d) s.put<std::uint64_t>(static_cast<std::uint64_t>(t.data.size(d)));
    s.put<std::uint32_t>(static_cast<std::uint32_t>(t.type));
    s.put<std::uint64_t>(offset);
    offset += (sizes[i] + alignment - 1) / alignment * alignment;
  }
  s.pad_to(alignment);
  for (const auto& t : tensors) {
    write_tensor_data(s, t);
    s.pad_to(alignment);
  }
  s.commit();
}

}  // namespace tfm
