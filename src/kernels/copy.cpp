// Strided copy (dimension merging + memcpy of the contiguous inner run) and dtype conversion.
#include "kernels/copy.h"

#include <cstring>
#include <vector>

#include "kernels/parallel.h"
#include "tfm/error.h"

namespace tfm::kernels {

namespace {
struct Dims {
  std::vector<std::int64_t> shape, src, dst;
};

// Drop size-1 dims and merge neighbours that are contiguous in both src and dst.
Dims merge_dims(const std::int64_t* shape, const std::int64_t* ss, const std::int64_t* ds, int ndim) {
  Dims d;
  for (int i = 0; i < ndim; ++i) {
    if (shape[i] == 1) continue;
    if (!d.shape.empty() && d.src.back() == ss[i] * shape[i] && d.dst.back() == ds[i] * shape[i]) {
      d.shape.back() *= shape[i];
      d.src.back() = ss[i];
      d.dst.back() = ds[i];
    } else {
      d.shape.push_back(shape[i]);
      d.src.push_back(ss[i]);
      d.dst.push_back(ds[i]);
    }
  }
  if (d.shape.empty()) {  // a single element
    d.shape = {1};
    d.src = {1};
    d.dst = {1};
  }
  return d;
}
}  // namespace

void copy_strided(const void* src, const std::int64_t* src_strides, void* dst,
                  const std::int64_t* dst_strides, const std::int64_t* shape, int ndim,
                  std::size_t elem_size) {
  for (int i = 0; i < ndim; ++i)
    if (shape[i] == 0) return;
  const Dims d = merge_dims(shape, src_strides, dst_strides, ndim);
  const int nd = static_cast<int>(d.shape.size());
  const std::int64_t inner = d.shape[nd - 1];
  const bool inner_contig = d.src[nd - 1] == 1 && d.dst[nd - 1] == 1;
  std::int64_t outer = 1;
  for (int i = 0; i < nd - 1; ++i) outer *= d.shape[i];
  const auto* s = static_cast<const unsigned char*>(src);
  auto* t = static_cast<unsigned char*>(dst);
  parallel_for(outer, std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(inner, 1)),
               [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t o = begin; o < end; ++o) {
      // Decompose the outer index into per-dim offsets.
      std::int64_t rem = o, so = 0, to = 0;
      for (int i = nd - 2; i >= 0; --i) {
        const std::int64_t idx = rem % d.shape[i];
        rem /= d.shape[i];
        so += idx * d.src[i];
        to += idx * d.dst[i];
      }
      const unsigned char* sp = s + so * static_cast<std::int64_t>(elem_size);
      unsigned char* tp = t + to * static_cast<std::int64_t>(elem_size);
      if (inner_contig) {
        std::memcpy(tp, sp, static_cast<std::size_t>(inner) * elem_size);
      } else {
        const std::int64_t sst = d.src[nd - 1] * static_cast<std::int64_t>(elem_size);
        const std::int64_t dst_st = d.dst[nd - 1] * static_cast<std::int64_t>(elem_size);
        for (std::int64_t j = 0; j < inner; ++j) std::memcpy(tp + j * dst_st, sp + j * sst, elem_size);
      }
    }
  });
}

namespace {
template <class T>
double load_as_double(const void* p, std::int64_t i) {
  return static_cast<double>(static_cast<const T*>(p)[i]);
}

double load(const void* p, DType t, std::int64_t i) {
  switch (t) {
    case DType::f32: return load_as_double<float>(p, i);
    case DType::bf16: return bf16_to_f32(static_cast<const std::uint16_t*>(p)[i]);
    case DType::f16: return f16_to_f32(static_cast<const std::uint16_t*>(p)[i]);
    case DType::i32: return load_as_double<std::int32_t>(p, i);
    case DType::i64: return load_as_double<std::int64_t>(p, i);
    case DType::i8: return load_as_double<std::int8_t>(p, i);
    case DType::u8: return load_as_double<std::uint8_t>(p, i);
    default: fail("convert", "block type ", dtype_name(t), " has no per-element access (dequantize rows instead)");
  }
  return 0;
}

void store(void* p, DType t, std::int64_t i, double v) {
  switch (t) {
    case DType::f32: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    case DType::bf16: static_cast<std::uint16_t*>(p)[i] = f32_to_bf16(static_cast<float>(v)); break;
    case DType::f16: static_cast<std::uint16_t*>(p)[i] = f32_to_f16(static_cast<float>(v)); break;
    case DType::i32: static_cast<std::int32_t*>(p)[i] = static_cast<std::int32_t>(v); break;
    case DType::i64: static_cast<std::int64_t*>(p)[i] = static_cast<std::int64_t>(v); break;
    case DType::i8: static_cast<std::int8_t*>(p)[i] = static_cast<std::int8_t>(v); break;
    case DType::u8: static_cast<std::uint8_t*>(p)[i] = static_cast<std::uint8_t>(v); break;
    default: fail("convert", "block type ", dtype_name(t), " has no per-element access (quantize rows instead)");
  }
}
}  // namespace

void convert(const void* src, DType src_type, void* dst, DType dst_type, std::int64_t n) {
  if (src_type == dst_type) {
    std::memcpy(dst, src, static_cast<std::size_t>(n) * dtype_size(src_type));
    return;
  }
  // i64 values beyond 2^53 would lose bits through double: copy integers exactly instead.
  if (!dtype_is_float(src_type) && !dtype_is_float(dst_type)) {
    for (std::int64_t i = 0; i < n; ++i) {
      std::int64_t v = src_type == DType::i64 ? static_cast<const std::int64_t*>(src)[i]
                                               : static_cast<std::int64_t>(load(src, src_type, i));
      if (dst_type == DType::i64) static_cast<std::int64_t*>(dst)[i] = v;
      else store(dst, dst_type, i, static_cast<double>(v));
    }
    return;
  }
  parallel_for(n, 1 << 14, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) store(dst, dst_type, i, load(src, src_type, i));
  });
}

}  // namespace tfm::kernels
