// Square tiles of floats transposed in registers, for packing: dst[d * ldd + c] =
// rows[c][d0 + d] for c, d < size (16 on AVX-512, 8 on AVX2; none on the generic build, whose
// callers copy element by element). A tile is `size` loads, a few shuffles per row and `size`
// stores where an element-by-element copy does size² loads and size² strided stores. Pure data
// movement: the result is the scalar copy's bit for bit.
//
// Internal linkage (an anonymous namespace), as gemm_tile_io.h: each ISA's translation unit
// keeps its own copy, so no copy compiled with wider flags reaches a narrower CPU.
#pragma once

#include <cstdint>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

#include "kernels/simd/vec.h"

namespace tfm::kernels::simd {
namespace {

template <class Isa>
struct TileTranspose {
  static constexpr bool available = false;
  static constexpr int size = 1;
  static void run(const float* const* /*rows*/, std::int64_t /*d0*/, float* /*dst*/, std::int64_t /*ldd*/) {}
};

#if defined(__AVX512F__)
template <>
struct TileTranspose<Avx512> {
  static constexpr bool available = true;
  static constexpr int size = 16;
  static void run(const float* const* rows, std::int64_t d0, float* dst, std::int64_t ldd) {
    __m512 r[16], t[16];
    for (int c = 0; c < 16; ++c) r[c] = _mm512_loadu_ps(rows[c] + d0);
    for (int c = 0; c < 16; c += 2) {  // per 128-bit lane: rows c, c+1 interleaved
      t[c] = _mm512_unpacklo_ps(r[c], r[c + 1]);
      t[c + 1] = _mm512_unpackhi_ps(r[c], r[c + 1]);
    }
    for (int c = 0; c < 16; c += 4) {  // per lane: one dim of rows c .. c+3
      r[c] = _mm512_shuffle_ps(t[c], t[c + 2], _MM_SHUFFLE(1, 0, 1, 0));
      r[c + 1] = _mm512_shuffle_ps(t[c], t[c + 2], _MM_SHUFFLE(3, 2, 3, 2));
      r[c + 2] = _mm512_shuffle_ps(t[c + 1], t[c + 3], _MM_SHUFFLE(1, 0, 1, 0));
      r[c + 3] = _mm512_shuffle_ps(t[c + 1], t[c + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int g = 0; g < 16; g += 8)  // lanes of rows g..g+3 and g+4..g+7 gathered
      for (int q = 0; q < 4; ++q) {
        t[g + q] = _mm512_shuffle_f32x4(r[g + q], r[g + 4 + q], 0x88);
        t[g + 4 + q] = _mm512_shuffle_f32x4(r[g + q], r[g + 4 + q], 0xDD);
      }
    for (int q = 0; q < 8; ++q) {  // then rows 0-7 with rows 8-15
      r[q] = _mm512_shuffle_f32x4(t[q], t[8 + q], 0x88);
      r[8 + q] = _mm512_shuffle_f32x4(t[q], t[8 + q], 0xDD);
    }
    for (int d = 0; d < 16; ++d) _mm512_storeu_ps(dst + d * ldd, r[d]);
  }
};
#endif

#if defined(__AVX2__)
template <>
struct TileTranspose<Avx2> {
  static constexpr bool available = true;
  static constexpr int size = 8;
  static void run(const float* const* rows, std::int64_t d0, float* dst, std::int64_t ldd) {
    __m256 r[8], t[8];
    for (int c = 0; c < 8; ++c) r[c] = _mm256_loadu_ps(rows[c] + d0);
    for (int c = 0; c < 8; c += 2) {  // per 128-bit lane: rows c, c+1 interleaved
      t[c] = _mm256_unpacklo_ps(r[c], r[c + 1]);
      t[c + 1] = _mm256_unpackhi_ps(r[c], r[c + 1]);
    }
    for (int c = 0; c < 8; c += 4) {  // per lane: dims of rows c .. c+3
      r[c] = _mm256_shuffle_ps(t[c], t[c + 2], _MM_SHUFFLE(1, 0, 1, 0));
      r[c + 1] = _mm256_shuffle_ps(t[c], t[c + 2], _MM_SHUFFLE(3, 2, 3, 2));
      r[c + 2] = _mm256_shuffle_ps(t[c + 1], t[c + 3], _MM_SHUFFLE(1, 0, 1, 0));
      r[c + 3] = _mm256_shuffle_ps(t[c + 1], t[c + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int q = 0; q < 4; ++q) {  // low lanes: dims 0-3, high lanes: dims 4-7
      _mm256_storeu_ps(dst + q * ldd, _mm256_permute2f128_ps(r[q], r[4 + q], 0x20));
      _mm256_storeu_ps(dst + (4 + q) * ldd, _mm256_permute2f128_ps(r[q], r[4 + q], 0x31));
    }
  }
};
#endif

}  // namespace
}  // namespace tfm::kernels::simd
