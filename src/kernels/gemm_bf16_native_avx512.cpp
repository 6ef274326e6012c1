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

#include "kernels/bf16_pairs_avx512.h"
#include "kernels/gemm_bf16_impl.h"

namespace tfm::kernels::gemm_bf16_isa {
namespace {

// 12 x 32 tile: 24 accumulators + 2 B vectors + the broadcasts fit the 32 zmm registers, and
// each B vector pair loaded per k-pair feeds 24 VDPBF16PS instead of 16 (8 x 32 before).
constexpr int kMR = 12, kNR = 32;

using bf16_pairs::first_n;
using bf16_pairs::pairs_of;
using bf16_pairs::pairs_of_run;

// Eight rows x_r = X + r * ldx (r < rows; the others read as zero) of K consecutive values
// each, transposed into pair words: word p of row r goes to dst[p * stride + r]. 16 pairs
// of the 8 rows are converted at a time and transposed in registers (8 x 16 words -> 16 x 8).
void rows8_pairs(const float* X, std::int64_t ldx, int rows, std::int64_t K, std::uint32_t* dst, std::int64_t stride) {
  const std::int64_t P = (K + 1) / 2;
  for (std::int64_t p0 = 0; p0 < P; p0 += 16) {
    const std::int64_t k0 = 2 * p0;
    __m512i R[8];
    for (int r = 0; r < 8; ++r) R[r] = r < rows ? pairs_of_run(X + r * ldx + k0, K - k0) : _mm512_setzero_si512();
    // Per 128-bit lane l (pairs 4l .. 4l+3): t = rows interleaved two by two, u = four by four.
    __m512i t[8], u[8];
    for (int r = 0; r < 8; r += 2) {
      t[r] = _mm512_unpacklo_epi32(R[r], R[r + 1]);      // p = 4l, 4l+1 of rows r, r+1
      t[r + 1] = _mm512_unpackhi_epi32(R[r], R[r + 1]);  // p = 4l+2, 4l+3
    }
    for (int g = 0; g < 2; ++g) {  // rows 4g .. 4g+3
      const __m512i* tg = t + 4 * g;
      u[4 * g + 0] = _mm512_unpacklo_epi64(tg[0], tg[2]);  // p = 4l
      u[4 * g + 1] = _mm512_unpackhi_epi64(tg[0], tg[2]);  // p = 4l+1
      u[4 * g + 2] = _mm512_unpacklo_epi64(tg[1], tg[3]);  // p = 4l+2
      u[4 * g + 3] = _mm512_unpackhi_epi64(tg[1], tg[3]);  // p = 4l+3
    }
    // Pair p = 4l + q is lane l of u[q] (rows 0-3) and of u[4 + q] (rows 4-7).
    const __m512i first = _mm512_set_epi64(11, 10, 3, 2, 9, 8, 1, 0), second = _mm512_set_epi64(15, 14, 7, 6, 13, 12, 5, 4);
    for (int q = 0; q < 4; ++q) {
      const __m512i a = _mm512_permutex2var_epi64(u[q], first, u[4 + q]);   // pairs q, 4+q (8 rows each)
      const __m512i b = _mm512_permutex2var_epi64(u[q], second, u[4 + q]);  // pairs 8+q, 12+q
      const __m512i pairs[2] = {a, b};  // a: pairs q (low 256 bits), 4+q (high); b: 8+q, 12+q
      for (int h = 0; h < 2; ++h)
        for (int half = 0; half < 2; ++half) {
          const std::int64_t p = p0 + 8 * h + 4 * half + q;
          if (p >= P) continue;
          const __m256i words = half == 0 ? _mm512_castsi512_si256(pairs[h]) : _mm512_extracti64x4_epi64(pairs[h], 1);
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + p * stride), words);
        }
    }
  }
}

// rows8_pairs for four rows (the second row group of a 12-row A panel): two interleave
// steps put each pair's four words in one 128-bit lane, stored as it is, where the 8-row
// transpose would shuffle four zero rows along.
void rows4_pairs(const float* X, std::int64_t ldx, int rows, std::int64_t K, std::uint32_t* dst, std::int64_t stride) {
  const std::int64_t P = (K + 1) / 2;
  for (std::int64_t p0 = 0; p0 < P; p0 += 16) {
    const std::int64_t k0 = 2 * p0;
    __m512i R[4];
    for (int r = 0; r < 4; ++r) R[r] = r < rows ? pairs_of_run(X + r * ldx + k0, K - k0) : _mm512_setzero_si512();
    const __m512i t0 = _mm512_unpacklo_epi32(R[0], R[1]), t1 = _mm512_unpackhi_epi32(R[0], R[1]);  // per lane l:
    const __m512i t2 = _mm512_unpacklo_epi32(R[2], R[3]), t3 = _mm512_unpackhi_epi32(R[2], R[3]);  // p = 4l..4l+3
    const __m512i u[4] = {_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2),  // pair 4l + q of rows 0-3
                          _mm512_unpacklo_epi64(t1, t3), _mm512_unpackhi_epi64(t1, t3)};  // is lane l of u[q]
    for (int q = 0; q < 4; ++q) {
      const __m128i lanes[4] = {_mm512_castsi512_si128(u[q]), _mm512_extracti32x4_epi32(u[q], 1),
                                _mm512_extracti32x4_epi32(u[q], 2), _mm512_extracti32x4_epi32(u[q], 3)};
      for (int l = 0; l < 4; ++l) {
        const std::int64_t p = p0 + 4 * l + q;
        if (p < P) _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + p * stride), lanes[l]);
      }
    }
  }
}

void native_pack_a(bool ta, const float* A, std::int64_t lda, std::int64_t m0, std::int64_t rows, std::int64_t K,
                   void* panel) {
  std::uint32_t* out = static_cast<std::uint32_t*>(panel);
  const std::int64_t P = (K + 1) / 2;
  if (ta) {  // A stored (K, M): rows k and k+1 hold the panel's values contiguously
    const __mmask16 m = first_n(rows), store = first_n(kMR);
    const float* col = A + m0;
    for (std::int64_t p = 0; p < P; ++p) {
      const std::int64_t k = 2 * p;
      const __m512 even = _mm512_maskz_loadu_ps(m, col + k * lda);
      const __m512 odd = k + 1 < K ? _mm512_maskz_loadu_ps(m, col + (k + 1) * lda) : _mm512_setzero_ps();
      _mm512_mask_storeu_epi32(out + p * kMR, store, pairs_of(even, odd));
    }
    return;
  }
  // Rows 0-7, then rows 8-11 (the second group stores 4 words per pair; with no rows left it
  // writes the zero words and reads nothing, so it gets a pointer inside A).
  const float* second = rows > 8 ? A + (m0 + 8) * lda : A + m0 * lda;
  rows8_pairs(A + m0 * lda, lda, static_cast<int>(std::min<std::int64_t>(8, rows)), K, out, kMR);
  static_assert(kMR - 8 == 4, "the second row group is packed by rows4_pairs");
  rows4_pairs(second, lda, static_cast<int>(std::max<std::int64_t>(0, rows - 8)), K, out + 8, kMR);
}

void native_pack_b(bool tb, const float* B, std::int64_t ldb, std::int64_t n0, std::int64_t cols, std::int64_t K,
                   void* panel) {
  std::uint32_t* out = static_cast<std::uint32_t*>(panel);
  const std::int64_t P = (K + 1) / 2;
  if (!tb) {  // B stored (K, N): rows k and k+1 are contiguous runs over the columns
    const __mmask16 m0 = first_n(cols), m1 = first_n(cols - 16);
    for (std::int64_t p = 0; p < P; ++p) {
      const std::int64_t k = 2 * p;
      const float* even = B + k * ldb + n0;
      const bool has_odd = k + 1 < K;
      for (int h = 0; h < 2; ++h) {
        const __mmask16 m = h == 0 ? m0 : m1;
        const __m512 e = _mm512_maskz_loadu_ps(m, even + 16 * h);
        const __m512 o = has_odd ? _mm512_maskz_loadu_ps(m, even + ldb + 16 * h) : _mm512_setzero_ps();
        _mm512_storeu_si512(out + p * kNR + 16 * h, pairs_of(e, o));
      }
    }
    return;
  }
  // B stored (N, K): column j of op(B) is row n0 + j of B, its pairs contiguous; 8 at a time.
  for (int g = 0; g < kNR / 8; ++g)
    rows8_pairs(B + (n0 + 8 * g) * ldb, ldb, static_cast<int>(std::max<std::int64_t>(0, std::min<std::int64_t>(8, cols - 8 * g))),
                K, out + 8 * g, kNR);
}

void native_micro(std::int64_t P, const void* a_panel, const void* b_panel, float alpha, float beta, float* C,
                  std::int64_t ldc, int rows, int cols, bool load_acc, bool finish, const float* bias) {
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
  // The tile's C lines (two per row) are claimed for writing during the k loop, one every
  // fourth pair, so the stores at its end do not stall on cache misses (C is larger than the
  // caches: at K = 384 those stalls cost ~10% of the kernel), and the claims are spread out
  // rather than issued together, where they would hold the miss buffers the A and B streams
  // need. The sums do not change.
  const std::int64_t c_lines = 2 * rows;
  for (std::int64_t p = 0; p < P; ++p) {
    if ((p & 3) == 0 && (p >> 2) < c_lines) {
      const std::int64_t line = p >> 2;
      if ((line & 1) == 0 || cols > 16) __builtin_prefetch(C + (line >> 1) * ldc + 16 * (line & 1), 1, 3);
    }
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
        if (bias != nullptr) v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(m, bias + 16 * h));
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
