// Compact-weight kernels for AVX-512: bf16 / f16 weights here; block-quantized weights go to
// the VNNI tiles of qgemm_blocks_avx512.cpp. Compiled with -mavx512vnni (src/CMakeLists.txt)
// and only picked when cpuid reports AVX512_VNNI (qgemm.cpp).
//
// Rows of activations are taken up to 4 at a time so each weight row is widened once for
// all of them; every row runs the same instruction sequence whatever the group size, so a
// row's result does not depend on M (batch invariance).
// GCC 12 false positive inside avx512fintrin.h (see norm_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include "kernels/qgemm_act.h"

namespace tfm::kernels::qgemm_detail {
namespace {

__m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

struct RowPtrs {
  const float* x[4];
};

// bf16 / f16 weights widened to f32 in registers (a shift / vcvtph2ps), f32 FMAs with the
// activations (for bf16 already rounded to bf16 by qgemm_bf16.cpp: this is its emulation on
// CPUs without AVX512_BF16); two accumulators per row alternate over 16-wide chunks.
template <int R, bool kBf16>
void half_rows(const unsigned char* w, std::int64_t K, const RowPtrs& a, float* out) {
  __m512 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  std::int64_t k = 0;
  int parity = 0;
  auto widen = [](__m256i h) {
    if constexpr (kBf16) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    else return _mm512_cvtph_ps(h);
  };
  for (; k + 32 <= K; k += 32) {  // two chunks, one per accumulator (kept in registers)
    const __m512 w0 = widen(load256(w + 2 * k)), w1 = widen(load256(w + 2 * k + 32));
    for (int r = 0; r < R; ++r) {
      acc[r][0] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(a.x[r] + k), acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(a.x[r] + k + 16), acc[r][1]);
    }
  }
  if (k + 16 <= K) {
    const __m512 wf = widen(load256(w + 2 * k));
    for (int r = 0; r < R; ++r) acc[r][0] = _mm512_fmadd_ps(wf, _mm512_loadu_ps(a.x[r] + k), acc[r][0]);
    k += 16;
    parity = 1;
  }
  if (k < K) {  // the last partial chunk, masked
    const __mmask16 mask = static_cast<__mmask16>((1u << (K - k)) - 1);
    const __m512 wf = widen(_mm256_maskz_loadu_epi16(mask, w + 2 * k));
    for (int r = 0; r < R; ++r)
      if (parity) acc[r][1] = _mm512_fmadd_ps(wf, _mm512_maskz_loadu_ps(mask, a.x[r] + k), acc[r][1]);
      else acc[r][0] = _mm512_fmadd_ps(wf, _mm512_maskz_loadu_ps(mask, a.x[r] + k), acc[r][0]);
  }
  for (int r = 0; r < R; ++r) out[r] = _mm512_reduce_add_ps(_mm512_add_ps(acc[r][0], acc[r][1]));
}

template <int R>
void dispatch_rows(DType t, const unsigned char* w, std::int64_t K, const RowPtrs& a, float* out) {
  if (t == DType::bf16) return half_rows<R, true>(w, K, a, out);
  half_rows<R, false>(w, K, a, out);
}

void rows(DType wtype, std::int64_t M, std::int64_t n0, std::int64_t n1, std::int64_t K, const float* x,
          std::int64_t ldx, const QuantizedActs& acts, const void* w, std::size_t row_bytes, float* y,
          std::int64_t ldy) {
  if (acts.block) return block_rows_avx512_vnni(wtype, M, n0, n1, K, acts, w, row_bytes, y, ldy);
  for (std::int64_t n = n0; n < n1; ++n) {
    const auto* wr = static_cast<const unsigned char*>(w) + static_cast<std::size_t>(n) * row_bytes;
    for (std::int64_t m0 = 0; m0 < M; m0 += 4) {
      const int R = static_cast<int>(M - m0 < 4 ? M - m0 : 4);
      RowPtrs a{};
      for (int r = 0; r < R; ++r) a.x[r] = x + (m0 + r) * ldx;
      float out[4];
      switch (R) {
        case 4: dispatch_rows<4>(wtype, wr, K, a, out); break;
        case 3: dispatch_rows<3>(wtype, wr, K, a, out); break;
        case 2: dispatch_rows<2>(wtype, wr, K, a, out); break;
        default: dispatch_rows<1>(wtype, wr, K, a, out); break;
      }
      for (int r = 0; r < R; ++r) y[(m0 + r) * ldy + n] = out[r];
    }
  }
}

}  // namespace

const RowsFn rows_avx512_vnni = &rows;

}  // namespace tfm::kernels::qgemm_detail
