// The native bf16 GEMM kernel: VDPBF16PS (AVX512_BF16) on bf16 pairs, fp32 accumulators.
// Built with the AVX-512 flags (file name) plus -mavx512bf16 for this file only
// (src/CMakeLists.txt, so gcc and clang alike); run only when
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
#include <immintrin.h>

#include "kernels/gemm_bf16_impl.h"

namespace tfm::kernels::gemm_bf16_isa {
namespace {

constexpr int kMR = 8, kNR = 32;

// bf16 bits of 16 floats (low half of each 32-bit lane), the rule of bf16_bits() in
// gemm_bf16_impl.h: round to nearest even, NaN quieted, zero/denormal -> signed zero.
inline __m512i bf16_lanes(__m512 x) {
  const __m512i u = _mm512_castps_si512(x);
  const __m512i high = _mm512_srli_epi32(u, 16);
  const __m512i bias = _mm512_add_epi32(_mm512_and_si512(high, _mm512_set1_epi32(1)), _mm512_set1_epi32(0x7FFF));
  __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, bias), 16);
  const __mmask16 nan =
      _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)), _mm512_set1_epi32(0x7F800000));
  r = _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(high, _mm512_set1_epi32(0x40)));
  const __mmask16 tiny = _mm512_testn_epi32_mask(u, _mm512_set1_epi32(0x7F800000));
  return _mm512_mask_mov_epi32(r, tiny, _mm512_and_si512(high, _mm512_set1_epi32(0x8000)));
}
// 16 pair words from 16 even-k and 16 odd-k values.
inline __m512i pair_words(__m512 even, __m512 odd) {
  return _mm512_or_si512(bf16_lanes(even), _mm512_slli_epi32(bf16_lanes(odd), 16));
}
inline __mmask16 first_n(std::int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1u);
}
// Row x[0, K) of consecutive k as P pair words, word p written to dst[p * stride].
void row_pairs(const float* x, std::int64_t K, std::uint32_t* dst, std::int64_t stride) {
  const std::int64_t P = (K + 1) / 2;
  alignas(64) std::uint32_t w[16];
  for (std::int64_t p0 = 0; p0 < P; p0 += 16) {
    const std::int64_t k0 = 2 * p0;
    const __m512 lo = _mm512_maskz_loadu_ps(first_n(K - k0), x + k0);
    const __m512 hi = K - k0 > 16 ? _mm512_maskz_loadu_ps(first_n(K - k0 - 16), x + k0 + 16) : _mm512_setzero_ps();
    // 32 bf16 in k order: word i = bf16(x[2i]) | bf16(x[2i+1]) << 16
    const __m256i l16 = _mm512_cvtepi32_epi16(bf16_lanes(lo)), h16 = _mm512_cvtepi32_epi16(bf16_lanes(hi));
    _mm512_store_si512(w, _mm512_inserti64x4(_mm512_castsi256_si512(l16), h16, 1));
    const std::int64_t n = P - p0 < 16 ? P - p0 : 16;
    for (std::int64_t i = 0; i < n; ++i) dst[(p0 + i) * stride] = w[i];
  }
}

void native_pack_a(bool ta, const float* A, std::int64_t lda, std::int64_t m0, std::int64_t rows, std::int64_t K,
                   void* panel) {
  std::uint32_t* out = static_cast<std::uint32_t*>(panel);
  const std::int64_t P = (K + 1) / 2;
  if (ta) {  // A stored (K, M): rows k and k+1 hold the panel's values contiguously
    const __mmask16 m = first_n(rows);
    for (std::int64_t p = 0; p < P; ++p) {
      const std::int64_t k = 2 * p;
      const __m512 even = _mm512_maskz_loadu_ps(m, A + k * lda + m0);
      const __m512 odd = k + 1 < K ? _mm512_maskz_loadu_ps(m, A + (k + 1) * lda + m0) : _mm512_setzero_ps();
      _mm512_mask_storeu_epi32(out + p * kMR, static_cast<__mmask16>(0xFF), pair_words(even, odd));
    }
    return;
  }
  for (int r = 0; r < kMR; ++r) {
    if (r < rows) {
      row_pairs(A + (m0 + r) * lda, K, out + r, kMR);
    } else {
      for (std::int64_t p = 0; p < P; ++p) out[p * kMR + r] = 0;
    }
  }
}

void native_pack_b(bool tb, const float* B, std::int64_t ldb, std::int64_t n0, std::int64_t cols, std::int64_t K,
                   void* panel) {
  std::uint32_t* out = static_cast<std::uint32_t*>(panel);
  const std::int64_t P = (K + 1) / 2;
  if (!tb) {  // B stored (K, N): rows k and k+1 are contiguous runs over the columns
    const __mmask16 m0 = first_n(cols), m1 = first_n(cols > 16 ? cols - 16 : 0);
    for (std::int64_t p = 0; p < P; ++p) {
      const std::int64_t k = 2 * p;
      const float* even = B + k * ldb + n0;
      const bool has_odd = k + 1 < K;
      for (int h = 0; h < 2; ++h) {
        const __mmask16 m = h == 0 ? m0 : m1;
        const __m512 e = _mm512_maskz_loadu_ps(m, even + 16 * h);
        const __m512 o = has_odd ? _mm512_maskz_loadu_ps(m, even + ldb + 16 * h) : _mm512_setzero_ps();
        _mm512_storeu_si512(out + p * kNR + 16 * h, pair_words(e, o));
      }
    }
    return;
  }
  // B stored (N, K): column j of op(B) is row n0 + j of B, its pairs contiguous.
  for (int j = 0; j < kNR; ++j) {
    if (j < cols) {
      row_pairs(B + (n0 + j) * ldb, K, out + j, kNR);
    } else {
      for (std::int64_t p = 0; p < P; ++p) out[p * kNR + j] = 0;
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
