// The native bf16 GEMM kernel: VDPBF16PS (AVX512_BF16) on bf16 pairs, fp32 accumulators.
// Built with the AVX-512 flags (file name) plus avx512bf16 for this file only; run only when
// the CPU reports AVX512_BF16 (gemm_bf16.cpp checks).
//
// Panels hold bf16 pairs as 32-bit words, low half = element 2p, high half = element 2p+1:
//   A panel, per pair p: MR words (one per row)        -> broadcast one word per row
//   B panel, per pair p: NR words (one per column)     -> two 16-lane vectors
// VDPBF16PS adds the high products first, then the low ones (Intel SDM), which is the order
// gemm_bf16.h defines and the emulated kernels follow.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC target("avx512bf16")
#include <immintrin.h>

#include "kernels/gemm_bf16_impl.h"

namespace tfm::kernels::gemm_bf16_isa {
namespace {

constexpr int kMR = 8, kNR = 32;

inline std::uint32_t pair_word(float even, float odd) { return bf16_bits(even) | (bf16_bits(odd) << 16); }

void native_pack_a(bool ta, const float* A, std::int64_t lda, std::int64_t m0, std::int64_t rows, std::int64_t K,
                   void* panel) {
  std::uint32_t* out = static_cast<std::uint32_t*>(panel);
  const std::int64_t P = (K + 1) / 2;
  for (std::int64_t p = 0; p < P; ++p) {
    const std::int64_t k = 2 * p;
    for (int r = 0; r < kMR; ++r) {
      if (r >= rows) {
        out[p * kMR + r] = 0;
        continue;
      }
      const float even = at(A, lda, ta, m0 + r, k);
      const float odd = k + 1 < K ? at(A, lda, ta, m0 + r, k + 1) : 0.0f;
      out[p * kMR + r] = pair_word(even, odd);
    }
  }
}

void native_pack_b(bool tb, const float* B, std::int64_t ldb, std::int64_t n0, std::int64_t cols, std::int64_t K,
                   void* panel) {
  std::uint32_t* out = static_cast<std::uint32_t*>(panel);
  const std::int64_t P = (K + 1) / 2;
  if (!tb) {  // B stored (K, N): rows k and k+1 are contiguous runs over the columns
    for (std::int64_t p = 0; p < P; ++p) {
      const std::int64_t k = 2 * p;
      const float* even = B + k * ldb + n0;
      const float* odd = k + 1 < K ? even + ldb : nullptr;
      std::uint32_t* o = out + p * kNR;
      for (int j = 0; j < kNR; ++j)
        o[j] = j < cols ? pair_word(even[j], odd != nullptr ? odd[j] : 0.0f) : 0u;
    }
    return;
  }
  // B stored (N, K): column j of op(B) is row n0 + j of B, its pairs contiguous.
  for (int j = 0; j < kNR; ++j) {
    const float* row = j < cols ? B + (n0 + j) * ldb : nullptr;
    for (std::int64_t p = 0; p < P; ++p) {
      const std::int64_t k = 2 * p;
      out[p * kNR + j] = row == nullptr ? 0u : pair_word(row[k], k + 1 < K ? row[k + 1] : 0.0f);
    }
  }
}

void native_micro(std::int64_t P, const void* a_panel, const void* b_panel, float alpha, float beta, float* C,
                  std::int64_t ldc, int rows, int cols, bool load_acc, bool finish) {
  const std::uint32_t* a = static_cast<const std::uint32_t*>(a_panel);
  const std::uint32_t* b = static_cast<const std::uint32_t*>(b_panel);
  const __mmask16 m0 = cols >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << cols) - 1u);
  const __mmask16 m1 = cols >= 32 ? static_cast<__mmask16>(0xFFFF)
                       : cols <= 16 ? static_cast<__mmask16>(0) : static_cast<__mmask16>((1u << (cols - 16)) - 1u);
  __m512 acc[kMR][2];
  for (int r = 0; r < kMR; ++r) {
    if (load_acc && r < rows) {
      acc[r][0] = _mm512_maskz_loadu_ps(m0, C + r * ldc);
      acc[r][1] = _mm512_maskz_loadu_ps(m1, C + r * ldc + 16);
    } else {
      acc[r][0] = acc[r][1] = _mm512_setzero_ps();
    }
  }
  for (std::int64_t p = 0; p < P; ++p) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b + p * kNR);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(b + p * kNR + 16);
    const std::uint32_t* ap = a + p * kMR;
    for (int r = 0; r < kMR; ++r) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(ap[r]));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], av, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], av, b1);
    }
  }
  const __m512 va = _mm512_set1_ps(alpha), vb = _mm512_set1_ps(beta);
  for (int r = 0; r < rows; ++r) {
    float* c = C + r * ldc;
    for (int h = 0; h < 2; ++h) {
      const __mmask16 m = h == 0 ? m0 : m1;
      __m512 v = acc[r][h];
      if (finish) {
        v = _mm512_mul_ps(va, v);
        if (beta != 0.0f) v = _mm512_add_ps(v, _mm512_mul_ps(vb, _mm512_maskz_loadu_ps(m, c + 16 * h)));
      }
      _mm512_mask_storeu_ps(c + 16 * h, m, v);
    }
  }
}

constexpr Kernel make_native() {
  Kernel k;
  k.mr = kMR;
  k.nr = kNR;
  k.pair_bytes = 4;
  k.pack_a = &native_pack_a;
  k.pack_b = &native_pack_b;
  k.micro = &native_micro;
  return k;
}

}  // namespace

const Kernel native_avx512bf16 = make_native();

}  // namespace tfm::kernels::gemm_bf16_isa
