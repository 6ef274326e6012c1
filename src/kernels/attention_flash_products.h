// The matrix products of the fused attention kernels, as a policy the kernels are
// instantiated with (attention_flash_impl.h):
//   Fp32Products           fp32 operands, fp32 FMAs (block_gemm) — the default path;
//   EmulatedBf16Products   bf16 mixed precision (AttentionParams::bf16) on any ISA: the
//                          operands rounded to bf16, fp32 FMAs in the VDPBF16PS pair order;
//   NativeBf16Products     the same sums with VDPBF16PS (attention_flash_bf16_avx512.cpp).
// Every product is C (R x N) (+)= A (R x K) · X (K x N) with A's element (r, k) at
// A[r*ars + k*aks] and X's rows ldx apart (N a multiple of the vector width). same_a
// (same_x) says A (X) is the operand of the same policy object's previous product,
// unchanged, with the same shape: the bf16 policies then reuse its converted copy instead
// of rounding it again (the kernels keep one object per product role for that: the q block
// of S = q k^T stays while the key blocks pass, and so on). The sums are the same either way.
//
// bf16 sums (the rule of kernels/gemm_bf16.h, so the two bf16 policies agree bit for bit):
// both operands rounded to bf16 (round to nearest even, NaN quieted, denormals to signed
// zero), K padded to even with zeros and walked in pairs p, each C element one chain
//   c = c + a[2p+1] x[2p+1];  c = c + a[2p] x[2p]    (each step rounded to fp32)
// starting from C (accumulate) or zero. A product of two bf16 values is exact in fp32, so
// an FMA (or a multiply then an add) rounds each step exactly as VDPBF16PS does.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/gemm_bf16_impl.h"

namespace tfm::kernels::flash {

// Scratch is defined by attention_flash_impl.h before it includes this file; Fp32Products
// (over its block_gemm) is there too.

// C (RB x CB*W) (+)= the pair walk over P pairs of a (RB x 2P, row stride lda) and x (2P x CB*W).
template <class Isa, int RB, int CB>
void pair_tile(std::int64_t P, const float* a, std::int64_t lda, const float* x, std::int64_t ldx, float* C,
               std::int64_t ldc, bool accumulate) {
  using V = simd::Vec<Isa>;
  using T = typename V::type;
  constexpr int W = V::width;
  T c[RB][CB];
  for (int r = 0; r < RB; ++r)
    for (int cb = 0; cb < CB; ++cb) c[r][cb] = accumulate ? V::load(C + r * ldc + cb * W) : V::zero();
  for (std::int64_t p = 0; p < P; ++p) {
    T xo[CB], xe[CB];
    for (int cb = 0; cb < CB; ++cb) {
      xo[cb] = V::load(x + (2 * p + 1) * ldx + cb * W);
      xe[cb] = V::load(x + 2 * p * ldx + cb * W);
    }
    for (int r = 0; r < RB; ++r) {
      const T ao = V::set1(a[r * lda + 2 * p + 1]), ae = V::set1(a[r * lda + 2 * p]);
      for (int cb = 0; cb < CB; ++cb) c[r][cb] = V::fma(ae, xe[cb], V::fma(ao, xo[cb], c[r][cb]));
    }
  }
  for (int r = 0; r < RB; ++r)
    for (int cb = 0; cb < CB; ++cb) V::store(C + r * ldc + cb * W, c[r][cb]);
}

template <class Isa, int CB>
void pair_tile_rows(std::int64_t R, std::int64_t P, const float* a, std::int64_t lda, const float* x, std::int64_t ldx,
                    float* C, std::int64_t ldc, bool accumulate) {
  constexpr int RB = 4;
  std::int64_t r = 0;
  for (; r + RB <= R; r += RB) pair_tile<Isa, RB, CB>(P, a + r * lda, lda, x, ldx, C + r * ldc, ldc, accumulate);
  for (; r < R; ++r) pair_tile<Isa, 1, CB>(P, a + r * lda, lda, x, ldx, C + r * ldc, ldc, accumulate);
}

template <class Isa>
class EmulatedBf16Products {
 public:
  // max_dim: the largest R, N or K of any product (kBr, kBc, the padded head dim).
  explicit EmulatedBf16Products(std::int64_t max_dim) : a_((max_dim + 1) * max_dim), x_((max_dim + 1) * max_dim) {}
  void gemm(std::int64_t R, std::int64_t N, std::int64_t K, const float* A, std::int64_t ars, std::int64_t aks,
            const float* X, std::int64_t ldx, float* C, std::int64_t ldc, bool accumulate, bool same_a = false,
            bool same_x = false) {
    using V = simd::Vec<Isa>;
    constexpr int W = V::width;
    constexpr int CB = W == 16 ? 4 : 2;
    const std::int64_t Kp = K + (K & 1);  // the zero pad of an odd K
    float* a = a_.get();  // (R, Kp) rounded
    float* x = x_.get();  // (Kp, N) rounded
    if (!same_a)
      for (std::int64_t r = 0; r < R; ++r)
        for (std::int64_t k = 0; k < Kp; ++k) a[r * Kp + k] = k < K ? gemm_bf16_isa::bf16_value(A[r * ars + k * aks]) : 0.0f;
    if (!same_x)
      for (std::int64_t k = 0; k < Kp; ++k)
        for (std::int64_t n = 0; n < N; ++n) x[k * N + n] = k < K ? gemm_bf16_isa::bf16_value(X[k * ldx + n]) : 0.0f;
    const std::int64_t P = Kp / 2;
    std::int64_t n = 0;
    for (; n + CB * W <= N; n += CB * W) pair_tile_rows<Isa, CB>(R, P, a, Kp, x + n, N, C + n, ldc, accumulate);
    for (; n < N; n += W) pair_tile_rows<Isa, 1>(R, P, a, Kp, x + n, N, C + n, ldc, accumulate);
  }

 private:
  Scratch<Isa> a_, x_;
};

}  // namespace tfm::kernels::flash
