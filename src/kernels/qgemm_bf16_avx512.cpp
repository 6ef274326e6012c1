// bf16 weights times bf16-rounded activations with VDPBF16PS (qgemm_bf16.h). Compiled with
// -mavx512bf16 (src/CMakeLists.txt); run only where cpuid reports AVX512_BF16.
//
// A stored bf16 weight row is already in VDPBF16PS's operand layout (32 consecutive values per
// 64 bytes, element 2i in the low half of word i), so weights are used as loaded: no decoding,
// no buffer. The activations are rounded once per call into the same layout, zero-padded to a
// multiple of 32 so the last chunk needs a mask on the weights only.
//
// Register tile: up to kMR activation rows x kNR weight rows; every output (m, n) has two
// accumulators taking alternate 32-element chunks (two dependency chains even for a 1 x 1
// tile, the batch-1 case of one weight row) and ends with (acc0 + acc1) summed across lanes.
// Which rows share a tile changes only which loads are reused, never an output's operations
// or their order, so a row's result is bit-identical alone or in any batch.
// GCC 12 false positive inside avx512fintrin.h (see norm_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>

#include "kernels/bf16_pairs_avx512.h"
#include "kernels/qgemm_bf16.h"
#include "kernels/qgemm_tile_shape.h"

namespace tfm::kernels::qgemm_detail {
namespace {

constexpr int kMR = kTileRows;  // activation rows per register tile
constexpr int kNR = kTileCols;  // weight rows per register tile (4 x 2 x 2 = 16 accumulators)

__m512bh load_bh(const void* p) { return (__m512bh)_mm512_loadu_si512(p); }

// out[m][n] = Σ_k x[m][k] w[n][k] over the tile; x rows padded to 32 (zeros), w rows of K.
template <int MR, int NR>
void tile(const std::uint16_t* const* x, const unsigned char* const* w, std::int64_t K, float (&out)[kMR][kNR]) {
  __m512 acc0[MR][NR], acc1[MR][NR];
  for (int m = 0; m < MR; ++m)
    for (int n = 0; n < NR; ++n) acc0[m][n] = acc1[m][n] = _mm512_setzero_ps();
  auto step = [&](__m512 (&acc)[MR][NR], const __m512bh (&wv)[NR], std::int64_t k) [[gnu::always_inline]] {
    for (int m = 0; m < MR; ++m) {
      const __m512bh xv = load_bh(x[m] + k);
      for (int n = 0; n < NR; ++n) acc[m][n] = _mm512_dpbf16_ps(acc[m][n], xv, wv[n]);
    }
  };
  std::int64_t k = 0;
  for (; k + 64 <= K; k += 64) {
    __m512bh w0[NR], w1[NR];
    for (int n = 0; n < NR; ++n) {
      w0[n] = load_bh(w[n] + 2 * k);
      w1[n] = load_bh(w[n] + 2 * k + 64);
    }
    step(acc0, w0, k);
    step(acc1, w1, k + 32);
  }
  bool second = false;  // the next chunk's accumulator
  if (k + 32 <= K) {
    __m512bh w0[NR];
    for (int n = 0; n < NR; ++n) w0[n] = load_bh(w[n] + 2 * k);
    step(acc0, w0, k);
    k += 32;
    second = true;
  }
  if (k < K) {  // the last partial chunk: weights masked (nothing read past the row), x is padded
    const __mmask32 mask = static_cast<__mmask32>((std::uint64_t{1} << (K - k)) - 1);
    __m512bh wt[NR];
    for (int n = 0; n < NR; ++n) wt[n] = (__m512bh)_mm512_maskz_loadu_epi16(mask, w[n] + 2 * k);
    if (second) step(acc1, wt, k);
    else step(acc0, wt, k);
  }
  for (int m = 0; m < MR; ++m)
    for (int n = 0; n < NR; ++n) out[m][n] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[m][n], acc1[m][n]));
}

// Loop order (results do not depend on it): with one group of activation rows (decode) each
// weight row is streamed once; two rows at a time only while rows are short (<= 512 bytes), as
// for the block types (qgemm_blocks_avx512.cpp: interleaved streams of longer rows read slower).
// With several groups, weight rows are taken kNR at a time through all groups while all the
// activation rows fit in L1 (<= 16 KiB: batched decode at K = 768); otherwise in blocks of
// 192 KiB of weight rows (kept in L2) swept by one group at a time (its rows in L1).
// Measured on the 2-core Zen 4 (bf16 3072x768 and 5632x2048, M = 1, 8, 32, 128).
void rows(std::int64_t M, std::int64_t n0, std::int64_t n1, std::int64_t K, const Bf16Acts& a, const void* w,
          std::size_t row_bytes, float* y, std::int64_t ldy) {
  const auto* wbase = static_cast<const unsigned char*>(w);
  float out[kMR][kNR];
  const std::int64_t n_step = M > kMR || row_bytes <= 512 ? kNR : 1;
  const bool x_in_l1 = static_cast<std::size_t>(M) * row_bytes <= (16u << 10);
  const std::int64_t nb = M <= kMR ? n1 - n0
                          : x_in_l1 ? kNR
                                    : std::max<std::int64_t>(kNR, static_cast<std::int64_t>((192u << 10) / row_bytes) / kNR * kNR);
  for (std::int64_t nb0 = n0; nb0 < n1; nb0 += nb) {
    const std::int64_t nb1 = std::min(n1, nb0 + nb);
    for (std::int64_t m0 = 0; m0 < M; m0 += kMR) {
      const int mr = static_cast<int>(std::min<std::int64_t>(kMR, M - m0));
      const std::uint16_t* xr[kMR];
      for (int m = 0; m < mr; ++m) xr[m] = a.row(m0 + m);
      for (std::int64_t n = nb0; n < nb1; n += n_step) {
        const int nr = static_cast<int>(std::min<std::int64_t>(n_step, nb1 - n));
        const unsigned char* wr = wbase + static_cast<std::size_t>(n) * row_bytes;
        const unsigned char* wrow[kNR] = {wr, wr + row_bytes};
        with_tile(mr, nr, [&]<int MR, int NR>() { tile<MR, NR>(xr, wrow, K, out); });
        for (int m = 0; m < mr; ++m)
          for (int j = 0; j < nr; ++j) y[(m0 + m) * ldy + n + j] = out[m][j];
      }
    }
  }
}

// Each row rounded by VCVTNE2PS2BF16 (gemm_bf16.h's rule bit for bit), 32 values per store.
void prepare(std::int64_t M, std::int64_t K, const float* x, std::int64_t ldx, Bf16Acts& a) {
  a.rows = M;
  a.K = K;
  a.stride = (K + 31) / 32 * 32;
  a.v.resize(static_cast<std::size_t>(M * a.stride));
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t k = 0; k < a.stride; k += 32)
      _mm512_storeu_si512(a.v.data() + m * a.stride + k, bf16_pairs::pairs_of_run(x + m * ldx + k, K - k));
}

}  // namespace

const Bf16PrepareFn bf16_prepare_native = &prepare;
const Bf16RowsFn bf16_rows_native = &rows;

}  // namespace tfm::kernels::qgemm_detail
