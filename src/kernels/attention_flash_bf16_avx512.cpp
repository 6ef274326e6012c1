// The fused attention kernels in bf16 mixed precision with VDPBF16PS (AVX512_BF16): the
// products of attention_flash_impl.h over bf16 pair words, fp32 accumulators. Built with the
// AVX-512 flags (file name) plus -mavx512bf16 for this file only (src/CMakeLists.txt); run
// only when the CPU reports AVX512_BF16 (attention_flash.cpp checks). The sums are those of
// EmulatedBf16Products (attention_flash_products.h), bit for bit.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "kernels/attention_flash_impl.h"
#include "kernels/bf16_pairs_avx512.h"

namespace tfm::kernels::flash {
namespace {

using bf16_pairs::first_n;
using bf16_pairs::pairs_of;
using bf16_pairs::pairs_of_run;

// C (RB x CB*16) (+)= the pairs of a (word (r, p) at a[r*wrs + p*wps]) times x (P x CB*16 words, row stride ldx).
template <int RB, int CB>
void word_tile(std::int64_t P, const std::uint32_t* a, std::int64_t wrs, std::int64_t wps, const std::uint32_t* x,
               std::int64_t ldx, float* C, std::int64_t ldc, bool accumulate) {
  __m512 c[RB][CB];
  for (int r = 0; r < RB; ++r)
    for (int cb = 0; cb < CB; ++cb) c[r][cb] = accumulate ? _mm512_loadu_ps(C + r * ldc + cb * 16) : _mm512_setzero_ps();
  for (std::int64_t p = 0; p < P; ++p) {
    __m512bh xv[CB];
    for (int cb = 0; cb < CB; ++cb) xv[cb] = (__m512bh)_mm512_loadu_si512(x + p * ldx + cb * 16);
    for (int r = 0; r < RB; ++r) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[r * wrs + p * wps]));
      for (int cb = 0; cb < CB; ++cb) c[r][cb] = _mm512_dpbf16_ps(c[r][cb], av, xv[cb]);
    }
  }
  for (int r = 0; r < RB; ++r)
    for (int cb = 0; cb < CB; ++cb) _mm512_storeu_ps(C + r * ldc + cb * 16, c[r][cb]);
}

template <int CB>
void word_tile_rows(std::int64_t R, std::int64_t P, const std::uint32_t* a, std::int64_t wrs, std::int64_t wps,
                    const std::uint32_t* x, std::int64_t ldx, float* C, std::int64_t ldc, bool accumulate) {
  constexpr int RB = 4;
  std::int64_t r = 0;
  for (; r + RB <= R; r += RB) word_tile<RB, CB>(P, a + r * wrs, wrs, wps, x, ldx, C + r * ldc, ldc, accumulate);
  for (; r < R; ++r) word_tile<1, CB>(P, a + r * wrs, wrs, wps, x, ldx, C + r * ldc, ldc, accumulate);
}

class NativeBf16Products {
 public:
  explicit NativeBf16Products(std::int64_t max_dim) : a_((max_dim + 1) * max_dim), x_((max_dim + 1) * max_dim) {}
  // same_a / same_x: A (or X) is this object's previous call's operand, unchanged and with
  // the same shape, so its converted words are reused (attention_flash_products.h).
  void gemm(std::int64_t R, std::int64_t N, std::int64_t K, const float* A, std::int64_t ars, std::int64_t aks,
            const float* X, std::int64_t ldx, float* C, std::int64_t ldc, bool accumulate, bool same_a = false,
            bool same_x = false) {
    const std::int64_t P = (K + 1) / 2;
    auto* a = reinterpret_cast<std::uint32_t*>(a_.get());
    auto* x = reinterpret_cast<std::uint32_t*>(x_.get());
    if (!same_a && aks == 1) {  // A's rows contiguous along K: words (r, p) at a[r*P + p]
      wrs_ = P, wps_ = 1;
      for (std::int64_t r = 0; r < R; ++r)
        for (std::int64_t p0 = 0; p0 < P; p0 += 16)
          _mm512_mask_storeu_epi32(a + r * P + p0, first_n(P - p0), pairs_of_run(A + r * ars + 2 * p0, K - 2 * p0));
    } else if (!same_a) {  // ars == 1 (a transposed operand): K rows of R values, words (r, p) at a[p*R + r]
      wrs_ = 1, wps_ = R;
      for (std::int64_t p = 0; p < P; ++p)
        for (std::int64_t r0 = 0; r0 < R; r0 += 16) {
          const __mmask16 m = first_n(R - r0);
          const __m512 even = _mm512_maskz_loadu_ps(m, A + 2 * p * aks + r0);
          const __m512 odd = 2 * p + 1 < K ? _mm512_maskz_loadu_ps(m, A + (2 * p + 1) * aks + r0) : _mm512_setzero_ps();
          _mm512_mask_storeu_epi32(a + p * R + r0, m, pairs_of(even, odd));
        }
    }
    if (!same_x)
      for (std::int64_t p = 0; p < P; ++p)  // X: words (p, n) at x[p*N + n]; N is a multiple of 16
        for (std::int64_t n = 0; n < N; n += 16) {
          const __m512 even = _mm512_loadu_ps(X + 2 * p * ldx + n);
          const __m512 odd = 2 * p + 1 < K ? _mm512_loadu_ps(X + (2 * p + 1) * ldx + n) : _mm512_setzero_ps();
          _mm512_storeu_si512(x + p * N + n, pairs_of(even, odd));
        }
    std::int64_t n = 0;
    for (; n + 64 <= N; n += 64) word_tile_rows<4>(R, P, a, wrs_, wps_, x + n, N, C + n, ldc, accumulate);
    for (; n < N; n += 16) word_tile_rows<1>(R, P, a, wrs_, wps_, x + n, N, C + n, ldc, accumulate);
  }

 private:
  Scratch<simd::Avx512> a_, x_;  // words, in float-sized slots
  std::int64_t wrs_ = 0, wps_ = 0;  // where A's word (r, p) is: a_[r*wrs_ + p*wps_]
};

}  // namespace

void forward_avx512bf16(const AttentionParams& p, HeadsView q, HeadsView k, HeadsView v, float* out, float* lse) {
  forward<simd::Avx512, NativeBf16Products>(p, q, k, v, out, lse);
}

void backward_avx512bf16(const AttentionParams& p, HeadsView q, HeadsView k, HeadsView v, const float* out,
                         const float* lse, const float* dout, float* dq, float* dk, float* dv, float* dbias) {
  backward<simd::Avx512, NativeBf16Products>(p, q, k, v, out, lse, dout, dq, dk, dv, dbias);
}

}  // namespace tfm::kernels::flash
