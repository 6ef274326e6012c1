// GGML's block-quantized weight formats (the layouts GGUF files carry), as plain structs,
// with scalar reference dequantization (and quantization for Q8_0, the one block type the
// engine writes). Definitions follow ggml's block_* types and gguf-py/gguf/quants.py; every
// dequantizer is checked against a numpy implementation of those definitions
// (tools/reference/ref_gguf_blocks.py). A row of n weights is n / block_size consecutive
// blocks; scales are IEEE fp16 stored little-endian.
//
// Scalar code on purpose: the quantization work will add fast GEMV kernels over these same
// structs; these functions stay as their naive twins.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tfm::kernels {

constexpr std::int64_t kQK = 32;    // elements per block of the legacy formats
constexpr std::int64_t kQKK = 256;  // elements per super-block of the k-quants
constexpr std::int64_t kKScaleBytes = 12;

// x = d * q, q in [-127, 127]
struct BlockQ8_0 {
  std::uint16_t d;
  std::int8_t qs[kQK];
};
// x = d * (q - 8); element j < 16 in the low nibble of qs[j], element j + 16 in its high nibble
struct BlockQ4_0 {
  std::uint16_t d;
  std::uint8_t qs[kQK / 2];
};
// x = d * q + m
struct BlockQ4_1 {
  std::uint16_t d, m;
  std::uint8_t qs[kQK / 2];
};
// x = d * (q - 16); q's fifth bit for element j is bit j of qh (little-endian u32)
struct BlockQ5_0 {
  std::uint16_t d;
  std::uint8_t qh[4];
  std::uint8_t qs[kQK / 2];
};
// 8 sub-blocks of 32: x = d * sc[s] * q - dmin * m[s], 6-bit sc/m packed into 12 bytes
struct BlockQ4_K {
  std::uint16_t d, dmin;
  std::uint8_t scales[kKScaleBytes];
  std::uint8_t qs[kQKK / 2];
};
// as Q4_K with a fifth bit per weight: bit s of qh[l] belongs to sub-block s
struct BlockQ5_K {
  std::uint16_t d, dmin;
  std::uint8_t scales[kKScaleBytes];
  std::uint8_t qh[kQKK / 8];
  std::uint8_t qs[kQKK / 2];
};
// 16 sub-blocks of 16: x = d * scales[s] * (q - 32), q 6 bits (4 in ql, 2 in qh)
struct BlockQ6_K {
  std::uint8_t ql[kQKK / 2];
  std::uint8_t qh[kQKK / 4];
  std::int8_t scales[kQKK / 16];
  std::uint16_t d;
};

static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 &&
              sizeof(BlockQ5_0) == 22 && sizeof(BlockQ4_K) == 144 && sizeof(BlockQ5_K) == 176 &&
              sizeof(BlockQ6_K) == 210, "block layouts must match ggml's byte for byte");

// The 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes of Q4_K/Q5_K.
inline void scale_min_k4(int j, const std::uint8_t* q, std::uint8_t& sc, std::uint8_t& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = static_cast<std::uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    m = static_cast<std::uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Each dequantizer writes n floats from n / block_size blocks at `blocks` (any alignment:
// blocks are read byte-wise). n must be a multiple of the block size (the caller checks).
void dequantize_q8_0(const void* blocks, float* out, std::int64_t n);
void dequantize_q4_0(const void* blocks, float* out, std::int64_t n);
void dequantize_q4_1(const void* blocks, float* out, std::int64_t n);
void dequantize_q5_0(const void* blocks, float* out, std::int64_t n);
void dequantize_q4_k(const void* blocks, float* out, std::int64_t n);
void dequantize_q5_k(const void* blocks, float* out, std::int64_t n);
void dequantize_q6_k(const void* blocks, float* out, std::int64_t n);
void dequantize_f16(const void* src, float* out, std::int64_t n);
void dequantize_bf16(const void* src, float* out, std::int64_t n);

// ggml's quantize_row_q8_0_ref: d = max|x| / 127, q = round-half-away(x * (1/d)), d stored as
// fp16. Writes n / 32 blocks (n a multiple of 32).
void quantize_q8_0(const float* x, void* blocks, std::int64_t n);
// ggml's quantize_row_q4_0_ref, quantize_row_q4_K_ref and quantize_row_q6_K_ref (no importance
// weights): byte-identical to llama.cpp's reference quantizers (quant_blocks_quantize.cpp).
void quantize_q4_0(const float* x, void* blocks, std::int64_t n);
void quantize_q4_k(const float* x, void* blocks, std::int64_t n);
void quantize_q6_k(const float* x, void* blocks, std::int64_t n);

}  // namespace tfm::kernels
