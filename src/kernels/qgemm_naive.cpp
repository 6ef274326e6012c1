// The naive twins of the compact-weight kernels: one weight row dequantized at a time, then
// f32 dot products in index order. Slow and obviously right: the reference every fast
// kernel in qgemm*.cpp is tested against.
#include <vector>

#include "kernels/qgemm.h"
#include "kernels/quant_blocks.h"
#include "kernels/quant_repack.h"
#include "tfm/error.h"

namespace tfm::kernels {

void dequantize_rows(DType type, const void* in, float* out, std::int64_t rows, std::int64_t K) {
  if (dtype_is_x16(type)) {  // a whole matrix (or groups), back to plain rows first (quant_repack.h)
    std::vector<unsigned char> plain(static_cast<std::size_t>(rows) * dtype_row_bytes(x16_plain(type), K));
    unpack_x16(type, in, plain.data(), rows, K);
    return dequantize_rows(x16_plain(type), plain.data(), out, rows, K);
  }
  const std::size_t row_bytes = dtype_row_bytes(type, K);
  for (std::int64_t r = 0; r < rows; ++r) {
    const void* src = static_cast<const unsigned char*>(in) + static_cast<std::size_t>(r) * row_bytes;
    float* dst = out + r * K;
    switch (type) {
      case DType::f32: for (std::int64_t k = 0; k < K; ++k) dst[k] = static_cast<const float*>(src)[k]; break;
      case DType::bf16: dequantize_bf16(src, dst, K); break;
      case DType::f16: dequantize_f16(src, dst, K); break;
      case DType::q8_0: dequantize_q8_0(src, dst, K); break;
      case DType::q4_0: dequantize_q4_0(src, dst, K); break;
      case DType::q4_k: dequantize_q4_k(src, dst, K); break;
      case DType::q6_k: dequantize_q6_k(src, dst, K); break;
      default: fail("dequantize", "weights of type ", dtype_name(type), " are not supported");
    }
  }
}

void quantize_rows(DType type, const float* x, void* out, std::int64_t rows, std::int64_t K) {
  if (dtype_is_x16(type)) {
    quantize_rows(x16_plain(type), x, out, rows, K);
    return repack_x16(x16_plain(type), out, rows, K);
  }
  const std::size_t row_bytes = dtype_row_bytes(type, K);
  for (std::int64_t r = 0; r < rows; ++r) {
    void* dst = static_cast<unsigned char*>(out) + static_cast<std::size_t>(r) * row_bytes;
    const float* src = x + r * K;
    switch (type) {
      case DType::f32: for (std::int64_t k = 0; k < K; ++k) static_cast<float*>(dst)[k] = src[k]; break;
      case DType::bf16:
        for (std::int64_t k = 0; k < K; ++k) static_cast<std::uint16_t*>(dst)[k] = f32_to_bf16(src[k]);
        break;
      case DType::f16:
        for (std::int64_t k = 0; k < K; ++k) static_cast<std::uint16_t*>(dst)[k] = f32_to_f16(src[k]);
        break;
      case DType::q8_0: quantize_q8_0(src, dst, K); break;
      case DType::q4_0: quantize_q4_0(src, dst, K); break;
      case DType::q4_k: quantize_q4_k(src, dst, K); break;
      case DType::q6_k: quantize_q6_k(src, dst, K); break;
      default: fail("quantize", "quantizing to ", dtype_name(type), " is not implemented yet");
    }
  }
}

void qgemm_naive(DType wtype, std::int64_t M, std::int64_t N, std::int64_t K, const float* x, std::int64_t ldx,
                 const void* w, float* y, std::int64_t ldy) {
  if (dtype_is_x16(wtype)) {  // rows interleaved in groups: back to plain rows
    std::vector<unsigned char> plain(static_cast<std::size_t>(N) * dtype_row_bytes(x16_plain(wtype), K));
    unpack_x16(wtype, w, plain.data(), N, K);
    return qgemm_naive(x16_plain(wtype), M, N, K, x, ldx, plain.data(), y, ldy);
  }
  const std::size_t row_bytes = dtype_row_bytes(wtype, K);
  std::vector<float> row(static_cast<std::size_t>(K));
  for (std::int64_t n = 0; n < N; ++n) {
    dequantize_rows(wtype, static_cast<const unsigned char*>(w) + static_cast<std::size_t>(n) * row_bytes, row.data(),
                    1, K);
    for (std::int64_t m = 0; m < M; ++m) {
      const float* xm = x + m * ldx;
      float acc = 0.0f;
      for (std::int64_t k = 0; k < K; ++k) acc += xm[k] * row[static_cast<std::size_t>(k)];
      y[m * ldy + n] = acc;
    }
  }
}

}  // namespace tfm::kernels
