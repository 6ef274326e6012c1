// bf16 GEMM for mixed-precision training: both operands are fp32 tensors (activations,
// master weights, gradients) rounded to bf16 on the way in; products are summed in fp32 and
// C is fp32. Row-major, the same contract as gemm.h:
//   C[M,N] = alpha * bf16(op(A)) bf16(op(B)) + beta * C,  op(X) = X or Xᵀ.
//
// Rounding: round-to-nearest-even, NaN kept (quieted), inputs whose fp32 exponent field is
// zero (zeros and denormals) become signed zero — what VCVTNE2PS2BF16 does (DAZ).
//
// Summation order (every path that is ours, so they agree bit for bit): K is padded to an
// even length with zeros and walked in pairs p = 0, 1, ...; for each pair
//   acc = acc + a[2p+1] b[2p+1];  acc = acc + a[2p] b[2p]   (each step rounded to fp32)
// which is the order VDPBF16PS specifies. A product of two bf16 values is exact in fp32, so
// the emulated path (FMA or mul+add over fp32 copies of the bf16 values) computes the very
// same sums. Each C element is one chain over all of K: results do not depend on the
// thread count, the blocking or the ISA.
//
// Error bound (tests/unit/kernels/test_gemm_bf16.cpp): with u = 2^-8 (bf16) and v = 2^-24 (fp32),
//   |C - A·B| <= (2u + u² + K v / (1 - K v)) · Σ_k |a_k b_k|     (alpha = 1, beta = 0).
#pragma once

#include <cstdint>

#include "kernels/gemm_packed.h"

namespace tfm::kernels {

// Which implementation runs the products.
enum class Bf16Path {
  native,    // our VDPBF16PS kernel (AVX512_BF16 CPUs with TFM_ISA=avx512)
  onednn,    // oneDNN's bf16 matmul primitive (builds linking oneDNN; opt-in, see below)
  emulated,  // bf16-rounded operands, fp32 FMAs over simd::Vec<Isa> of the active ISA
};
const char* bf16_path_name(Bf16Path path);

// The path used: TFM_BF16=native|onednn|emulated from the environment when set (an
// unavailable choice is an error), else native when the CPU has AVX512_BF16 and the active
// ISA is avx512, else emulated. docs/benchmarks.md has the measurement behind the default.
Bf16Path bf16_path();
void set_bf16_path(Bf16Path path);  // tests and benchmarks; throws when unavailable
bool bf16_path_available(Bf16Path path);
// One line for `tfm info` and the training summary, e.g. "native vdpbf16ps (avx512)".
const char* bf16_path_description();

void gemm_bf16(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, float alpha,
               const float* A, std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C,
               std::int64_t ldc);
// C = bf16(op(A)) bf16(op(B)) + bias, the bias (N values) added to every row: a Linear
// layer's forward in one pass over C. The sums are gemm_bf16's (alpha 1, beta 0) and the bias
// is then added in fp32, so C is bit for bit what a separate add after gemm_bf16 gives.
void gemm_bf16_bias(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, const float* A,
                    std::int64_t lda, const float* B, std::int64_t ldb, const float* bias, float* C, std::int64_t ldc);
// Batched: A, B, C advance by stride_a/b/c elements per batch item.
void gemm_bf16_batched(bool trans_a, bool trans_b, std::int64_t batch, std::int64_t M, std::int64_t N,
                       std::int64_t K, float alpha, const float* A, std::int64_t lda, std::int64_t stride_a,
                       const float* B, std::int64_t ldb, std::int64_t stride_b, float beta, float* C,
                       std::int64_t ldc, std::int64_t stride_c);

// Naive twin: the bf16-rounded products summed in double (no fp32 rounding at all).
void gemm_bf16_naive(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, float alpha,
                     const float* A, std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C,
                     std::int64_t ldc);
// Scalar twin of the kernels' exact summation order (the pair walk above), for tests.
void gemm_bf16_ordered(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, float alpha,
                       const float* A, std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C,
                       std::int64_t ldc);

// x rounded to bf16 (the rule above), returned as fp32.
float round_bf16(float x);
// In place over n values (used by the attention op in bf16 mode).
void round_bf16_inplace(float* x, std::int64_t n);

namespace gemm_bf16_isa {
// One path's packing and micro-kernel (pairs in the order above), run by gemm_packed.h.
using Kernel = packed::Kernel;
extern const Kernel emulated_generic, emulated_avx2, emulated_avx512, native_avx512bf16;
}  // namespace gemm_bf16_isa

namespace gemm_bf16_onednn {
bool available();
void run(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* A,
         std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc);
}  // namespace gemm_bf16_onednn

}  // namespace tfm::kernels
