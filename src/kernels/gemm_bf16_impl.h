// Packing and micro-kernel of the emulated bf16 GEMM, written once over simd::Vec<Isa> and
// compiled per ISA (gemm_bf16.cpp, gemm_bf16_avx2.cpp, gemm_bf16_avx512.cpp). Included only
// by those files; everything here is a template on V or has internal linkage, so no copy
// built with wide flags can be picked for a baseline caller.
//
// Panels hold fp32 copies of the bf16-rounded values (no integer lanes in simd::Vec), in the
// order the pair walk of gemm_bf16.h consumes them:
//   A panel, per pair p: for each of MR rows {a[2p+1], a[2p]}           (MR x 2 floats)
//   B panel, per pair p: NR values of row 2p+1, then NR values of row 2p (2 x NR floats)
// so for each pair the kernel does acc = fma(a_odd, b_odd, acc); acc = fma(a_even, b_even, acc):
// products of bf16 values are exact in fp32, so each step rounds exactly like VDPBF16PS.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/gemm_bf16.h"
#include "kernels/gemm_tile_io.h"
#include "kernels/simd/vec.h"

namespace tfm::kernels::gemm_bf16_isa {
namespace {

// f32 -> bf16 bits: RNE, NaN quieted, zero/denormal -> signed zero. Branch-free so packing
// loops vectorise.
inline std::uint32_t bf16_bits(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  const std::uint32_t rounded = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
  const std::uint32_t nan = (u >> 16) | 0x40u;
  const std::uint32_t zero = (u >> 16) & 0x8000u;
  std::uint32_t r = (u & 0x7FFFFFFFu) > 0x7F800000u ? nan : rounded;
  r = (u & 0x7F800000u) == 0 ? zero : r;
  return r;
}
inline float bf16_value(float x) {
  const std::uint32_t u = bf16_bits(x) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// op(X)[i, k] of a stored matrix: X is (I, K) or, transposed, (K, I).
inline float at(const float* X, std::int64_t ld, bool trans, std::int64_t i, std::int64_t k) {
  return trans ? X[k * ld + i] : X[i * ld + k];
}

template <class V, int MR>
void pack_a(bool ta, const float* A, std::int64_t lda, std::int64_t m0, std::int64_t rows, std::int64_t K,
            void* panel) {
  float* out = static_cast<float*>(panel);
  const std::int64_t P = (K + 1) / 2;
  for (std::int64_t p = 0; p < P; ++p)
    for (int r = 0; r < MR; ++r) {
      const bool row = r < rows;
      const std::int64_t k = 2 * p;
      out[(p * MR + r) * 2 + 0] = row && k + 1 < K ? bf16_value(at(A, lda, ta, m0 + r, k + 1)) : 0.0f;
      out[(p * MR + r) * 2 + 1] = row ? bf16_value(at(A, lda, ta, m0 + r, k)) : 0.0f;
    }
}

// op(B)[k, j] is B[k, j] (B stored (K, N)) or B[j, k] (tb, B stored (N, K)).
template <class V, int NR>
void pack_b(bool tb, const float* B, std::int64_t ldb, std::int64_t n0, std::int64_t cols, std::int64_t K,
            void* panel) {
  float* out = static_cast<float*>(panel);
  const std::int64_t P = (K + 1) / 2;
  for (std::int64_t p = 0; p < P; ++p) {
    float* odd = out + p * 2 * NR;
    float* even = odd + NR;
    const std::int64_t k = 2 * p;
    for (int j = 0; j < NR; ++j) {
      const bool col = j < cols;
      odd[j] = col && k + 1 < K ? bf16_value(at(B, ldb, !tb, n0 + j, k + 1)) : 0.0f;
      even[j] = col ? bf16_value(at(B, ldb, !tb, n0 + j, k)) : 0.0f;
    }
  }
}

// The full-K chain for an MR x NR tile (NR = 2 vectors), then alpha/beta (and the bias) on the way out.
template <class V, int MR>
void micro(std::int64_t P, const void* a_panel, const void* b_panel, float alpha, float beta, float* C,
           std::int64_t ldc, int rows, int cols, bool load_acc, bool finish, const float* bias) {
  using T = typename V::type;
  constexpr int W = V::width, NR = 2 * W;
  const float* a = static_cast<const float*>(a_panel);
  const float* b = static_cast<const float*>(b_panel);
  T acc[MR][2];
  tile_io::load<V, MR>(acc, C, ldc, rows, cols, load_acc);
  for (std::int64_t p = 0; p < P; ++p) {
    const float* bp = b + p * 2 * NR;
    const T bo0 = V::load(bp), bo1 = V::load(bp + W), be0 = V::load(bp + NR), be1 = V::load(bp + NR + W);
    const float* ap = a + p * MR * 2;
    for (int r = 0; r < MR; ++r) {
      const T ao = V::set1(ap[2 * r]), ae = V::set1(ap[2 * r + 1]);
      acc[r][0] = V::fma(ao, bo0, acc[r][0]);
      acc[r][1] = V::fma(ao, bo1, acc[r][1]);
      acc[r][0] = V::fma(ae, be0, acc[r][0]);
      acc[r][1] = V::fma(ae, be1, acc[r][1]);
    }
  }
  tile_io::store<V, MR>(acc, C, ldc, rows, cols, finish, alpha, beta, bias);
}

template <class V>
constexpr Kernel make_emulated() {
  constexpr int MR = 4, NR = 2 * V::width;
  Kernel k;
  k.mr = MR;
  k.nr = NR;
  k.pair_bytes = 2 * static_cast<int>(sizeof(float));
  k.pack_a = &pack_a<V, MR>;
  k.pack_b = &pack_b<V, NR>;
  k.micro = &micro<V, MR>;
  return k;
}

}  // namespace
}  // namespace tfm::kernels::gemm_bf16_isa
