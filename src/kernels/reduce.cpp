// Reductions: the deterministic blocking, dispatch, the baseline build and the naive twins.
#include "kernels/reduce.h"

#include <cstring>
#include <vector>

#include "kernels/dispatch.h"
#include "kernels/parallel.h"
#include "kernels/reduce_impl.h"

namespace tfm::kernels {
namespace {
// Fixed block sizes: they define the summation order, so they must never depend on the
// thread count. kColRows rows of a column block are summed top to bottom, then the blocks'
// partials are added in block order.
constexpr std::int64_t kColRows = 256;
constexpr std::int64_t kColCols = 2048;
constexpr std::int64_t kSumBlock = 1 << 14;  // sum_all: per-block float sums, added in double
constexpr std::int64_t kWorkGrain = 1 << 15;  // elements per thread chunk, at least
}  // namespace

float row_sum_generic(const float* x, std::int64_t n) { return impl::row_sum<simd::Generic>(x, n); }
float row_max_generic(const float* x, std::int64_t n) { return impl::row_max<simd::Generic>(x, n); }
void col_accumulate_generic(const float* x, std::int64_t ld, std::int64_t rows, float* y, std::int64_t cols) {
  impl::col_accumulate<simd::Generic>(x, ld, rows, y, cols);
}

void row_sum(const float* x, float* y, std::int64_t rows, std::int64_t cols) {
  const RowSumFn run = pick_isa(&row_sum_generic, &row_sum_avx2, &row_sum_avx512);
  const std::int64_t grain = cols > 0 ? (kWorkGrain + cols - 1) / cols : rows;
  parallel_for(rows, grain, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) y[r] = run(x + r * cols, cols);
  });
}

void row_max(const float* x, float* y, std::int64_t* idx, std::int64_t rows, std::int64_t cols) {
  const RowMaxFn run = pick_isa(&row_max_generic, &row_max_avx2, &row_max_avx512);
  const std::int64_t grain = (kWorkGrain + cols - 1) / cols;
  parallel_for(rows, grain, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      const float* xr = x + r * cols;
      y[r] = run(xr, cols);
      if (idx != nullptr) {  // a second pass finds the first position of the max
        std::int64_t k = 0;
        while (k + 1 < cols && xr[k] != y[r]) ++k;
        idx[r] = k;
      }
    }
  });
}

void col_sum(const float* x, float* y, std::int64_t rows, std::int64_t cols) {
  if (cols <= 0) return;
  if (rows <= 0) {
    std::memset(y, 0, static_cast<std::size_t>(cols) * sizeof(float));
    return;
  }
  const ColAccumulateFn acc = pick_isa(&col_accumulate_generic, &col_accumulate_avx2, &col_accumulate_avx512);
  const std::int64_t row_blocks = (rows + kColRows - 1) / kColRows;
  const std::int64_t col_blocks = (cols + kColCols - 1) / kColCols;
  // partial: (row_blocks, cols); with one row block it is y itself.
  std::vector<float> buffer(row_blocks > 1 ? static_cast<std::size_t>(row_blocks * cols) : 0);
  float* partial = row_blocks > 1 ? buffer.data() : y;
  const std::int64_t items = row_blocks * col_blocks;
  const std::int64_t item_elems = kColRows * (cols < kColCols ? cols : kColCols);
  parallel_for(items, (kWorkGrain + item_elems - 1) / item_elems, [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t it = i0; it < i1; ++it) {
      const std::int64_t rb = it / col_blocks, cb = it % col_blocks;
      const std::int64_t r0 = rb * kColRows, c0 = cb * kColCols;
      const std::int64_t nr = rows - r0 < kColRows ? rows - r0 : kColRows;
      const std::int64_t nc = cols - c0 < kColCols ? cols - c0 : kColCols;
      float* p = partial + rb * cols + c0;
      std::memset(p, 0, static_cast<std::size_t>(nc) * sizeof(float));
      acc(x + r0 * cols + c0, cols, nr, p, nc);
    }
  });
  if (row_blocks == 1) return;
  // y = partial[0] + partial[1] + ... in block order, each column independently.
  parallel_for(cols, kWorkGrain / row_blocks + 1, [&](std::int64_t c0, std::int64_t c1) {
    std::memcpy(y + c0, partial + c0, static_cast<std::size_t>(c1 - c0) * sizeof(float));
    acc(partial + cols + c0, cols, row_blocks - 1, y + c0, c1 - c0);
  });
}

void sum_middle(const float* x, float* y, std::int64_t outer, std::int64_t mid, std::int64_t inner) {
  if (inner == 1) return row_sum(x, y, outer, mid);
  if (outer == 1) return col_sum(x, y, mid, inner);
  // Many slabs: one thread per slab run (col_sum inside stays serial when nested); each
  // slab is summed by the same blocked code either way, so the order is fixed.
  const std::int64_t slab = mid * inner > 0 ? mid * inner : 1;
  parallel_for(outer, (kWorkGrain + slab - 1) / slab, [&](std::int64_t o0, std::int64_t o1) {
    for (std::int64_t o = o0; o < o1; ++o) col_sum(x + o * mid * inner, y + o * inner, mid, inner);
  });
}

float sum_all(const float* x, std::int64_t n) {
  const RowSumFn run = pick_isa(&row_sum_generic, &row_sum_avx2, &row_sum_avx512);
  return static_cast<float>(
      reduce_blocks(n, kSumBlock, [&](std::int64_t s, std::int64_t e) { return static_cast<double>(run(x + s, e - s)); }));
}

float max_all(const float* x, std::int64_t n) {
  const RowMaxFn run = pick_isa(&row_max_generic, &row_max_avx2, &row_max_avx512);
  const std::int64_t blocks = (n + kSumBlock - 1) / kSumBlock;
  std::vector<float> part(static_cast<std::size_t>(blocks));
  parallel_for(blocks, 1, [&](std::int64_t b0, std::int64_t b1) {
    for (std::int64_t b = b0; b < b1; ++b) {
      const std::int64_t s = b * kSumBlock, e = s + kSumBlock < n ? s + kSumBlock : n;
      part[static_cast<std::size_t>(b)] = run(x + s, e - s);
    }
  });
  float m = part[0];
  for (float p : part) m = p > m ? p : m;
  return m;
}

namespace naive {
void row_sum(const float* x, float* y, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (std::int64_t c = 0; c < cols; ++c) s += x[r * cols + c];
    y[r] = static_cast<float>(s);
  }
}
void row_max(const float* x, float* y, std::int64_t* idx, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = 0; r < rows; ++r) {
    std::int64_t best = 0;
    for (std::int64_t c = 1; c < cols; ++c)
      if (x[r * cols + c] > x[r * cols + best]) best = c;
    y[r] = x[r * cols + best];
    if (idx != nullptr) idx[r] = best;
  }
}
void col_sum(const float* x, float* y, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t c = 0; c < cols; ++c) {
    double s = 0;
    for (std::int64_t r = 0; r < rows; ++r) s += x[r * cols + c];
    y[c] = static_cast<float>(s);
  }
}
}  // namespace naive

}  // namespace tfm::kernels
