// Matrix products with weights stored in a compact type: f32, bf16, f16 or one of
// llama.cpp's block-quantized formats (q8_0, q4_0, q4_k, q6_k; layouts in quant_blocks.h).
// This is the operand of every linear layer, the LM head and the embedding gather at
// inference when a model is loaded with --dtype or from a quantized GGUF.
//
//   y (M, N) = x (M, K) · Wᵀ        W: N rows of K elements, row n at w + n * row_bytes
//
// Contracts every implementation keeps (the fast kernels and their naive twins):
// - Row-independent: y[m] depends on x[m] and W alone, computed by the same instructions in
//   the same order whatever M is, so batched decoding stays bit-identical to decoding alone.
// - K must be a multiple of the weight type's block size (dtype_row_bytes checks).
// - x and y are f32; ldx / ldy are row strides in floats.
#pragma once

#include <cstdint>

#include "tfm/dtype.h"

namespace tfm::kernels {

// The dispatching entry point (fastest kernel for the CPU and TFM_ISA), threaded over N.
void qgemm(DType wtype, std::int64_t M, std::int64_t N, std::int64_t K, const float* x, std::int64_t ldx,
           const void* w, float* y, std::int64_t ldy);

// The naive twin: dequantize each weight row to f32, then a plain f32 dot product per output.
// The reference for the fast kernels' tests (they may quantize x on the fly to int8 blocks,
// so they agree with this within the error that activation quantization adds, which the
// tests bound per type).
void qgemm_naive(DType wtype, std::int64_t M, std::int64_t N, std::int64_t K, const float* x, std::int64_t ldx,
                 const void* w, float* y, std::int64_t ldy);

// The scalar twin of the fast kernels: activations quantized to int8 blocks and integer dots
// per block exactly as the AVX2 / AVX-512 VNNI kernels do, one term at a time (it is also
// what qgemm runs under TFM_ISA=generic). Fast kernels equal it up to float reordering of the
// per-block terms; it differs from qgemm_naive by the activation quantization alone.
void qgemm_twin(DType wtype, std::int64_t M, std::int64_t N, std::int64_t K, const float* x, std::int64_t ldx,
                const void* w, float* y, std::int64_t ldy);

// Rows from which qgemm dequantizes weight tiles into the f32 GEMM (prefill) instead of
// running the integer kernels; up to kRowInvariantMaxRows rows it never does (row invariance).
// -1 (the default) is automatic: never for block types on the AVX-512 VNNI tiles, 32 otherwise.
std::int64_t qgemm_dequant_min_rows();
void set_qgemm_dequant_min_rows(std::int64_t rows);  // benchmarks and tests; < 0: automatic

// Whole rows: `rows` rows of K elements between f32 and `type` (any float or block type).
// Quantizers follow llama.cpp's quantize_row_*_ref so GGUF files we write decode the same in
// llama.cpp; q8_0 is implemented in quant_blocks.cpp, the others by the quantization work.
void quantize_rows(DType type, const float* x, void* out, std::int64_t rows, std::int64_t K);
void dequantize_rows(DType type, const void* in, float* out, std::int64_t rows, std::int64_t K);

}  // namespace tfm::kernels
