// The q4_0x16 kernel on AVX-512 VNNI (layout and reasons in quant_repack.h): one output row
// per 32-bit lane, 16 rows per group, so a block of the group is 288 contiguous bytes and
// needs no shuffle, gather or horizontal sum.
//
// Per block and activation row: the 16 lanes start from -8 Σ x (the nibbles' offset, the same
// for every row), eight vpdpbusd of nibbles (unsigned) against 4 activations broadcast (signed)
// give each lane an exact Σ x·(q - 8) of its row's block, then one convert and one FMA by
// d_w·d_x into the lane's accumulator. The floats of output (m, n) follow the same sequence
// for any M and any split over threads, so a row's result is bit-identical in a batch.
// GCC 12 false positive inside avx512fintrin.h (see norm_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/quant_repack.h"

namespace tfm::kernels::qgemm_detail {
namespace {

constexpr int kMR = 4;  // activation rows per pass over a group (the nibbles split once for all)

__m512i bcast4(const std::int8_t* p) {
  std::int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

template <int MR>
void group_rows(const unsigned char* wg, std::int64_t nb, const QuantizedActs& a, std::int64_t m0, float* y,
                std::int64_t ldy) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  __m512 acc[MR];
  for (int m = 0; m < MR; ++m) acc[m] = _mm512_setzero_ps();
  for (std::int64_t b = 0; b < nb; ++b) {
    const unsigned char* blk = wg + b * 288;
    const __m512 dw = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
    __m512i lo[4], hi[4];
    for (int i = 0; i < 4; ++i) {
      const __m512i v = _mm512_loadu_si512(blk + 32 + 64 * i);
      lo[i] = _mm512_and_si512(v, m4);
      hi[i] = _mm512_and_si512(_mm512_srli_epi16(v, 4), m4);
    }
    for (int m = 0; m < MR; ++m) {
      const std::int8_t* x = a.qrow(m0 + m) + 32 * b;
      // two chains (elements 0-15, 16-31) of four vpdpbusd each, one lane per weight row
      __m512i s0 = _mm512_set1_epi32(-8 * a.s32row(m0 + m)[b]), s1 = _mm512_setzero_si512();
      for (int i = 0; i < 4; ++i) {
        s0 = _mm512_dpbusd_epi32(s0, lo[i], bcast4(x + 4 * i));
        s1 = _mm512_dpbusd_epi32(s1, hi[i], bcast4(x + 16 + 4 * i));
      }
      const __m512 scale = _mm512_mul_ps(dw, _mm512_set1_ps(a.drow(m0 + m)[b]));
      acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(s0, s1)), scale, acc[m]);
    }
  }
  for (int m = 0; m < MR; ++m) _mm512_storeu_ps(y + (m0 + m) * ldy, acc[m]);
}

void q4_0x16(std::int64_t M, std::int64_t g0, std::int64_t g1, std::int64_t K, const QuantizedActs& a, const void* w,
             float* y, std::int64_t ldy) {
  const std::int64_t nb = K / 32;
  for (std::int64_t g = g0; g < g1; ++g) {
    const unsigned char* wg = static_cast<const unsigned char*>(w) + static_cast<std::size_t>(g * nb) * 288;
    float* yg = y + g * kQ4x16Rows;
    for (std::int64_t m0 = 0; m0 < M; m0 += kMR) {
      switch (std::min<std::int64_t>(kMR, M - m0)) {
        case 4: group_rows<4>(wg, nb, a, m0, yg, ldy); break;
        case 3: group_rows<3>(wg, nb, a, m0, yg, ldy); break;
        case 2: group_rows<2>(wg, nb, a, m0, yg, ldy); break;
        default: group_rows<1>(wg, nb, a, m0, yg, ldy); break;
      }
    }
  }
}

}  // namespace

const Q4x16Fn q4_0x16_avx512_vnni = &q4_0x16;

}  // namespace tfm::kernels::qgemm_detail
