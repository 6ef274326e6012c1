// Reductions over fp32 arrays in a fixed summation order, so a result never depends on the
// thread count: rows are split between threads whole, column sums use fixed row blocks
// combined in block order, and whole-array sums use fixed blocks added in double.
// (Results do differ slightly between ISAs — the vector width sets the order — as they do
// in every SIMD library.)
#pragma once

#include <cstdint>

namespace tfm::kernels {

// x: (rows, cols) contiguous -> y: (rows).
void row_sum(const float* x, float* y, std::int64_t rows, std::int64_t cols);
// y[r] = max_c x[r, c]; idx[r] (optional, may be null) = first c attaining it. cols >= 1.
void row_max(const float* x, float* y, std::int64_t* idx, std::int64_t rows, std::int64_t cols);
// x: (rows, cols) contiguous -> y: (cols): the sum over rows (bias gradients).
void col_sum(const float* x, float* y, std::int64_t rows, std::int64_t cols);
// x: (outer, mid, inner) contiguous -> y: (outer, inner): the sum over the middle dim.
void sum_middle(const float* x, float* y, std::int64_t outer, std::int64_t mid, std::int64_t inner);
// Sum / max of all n elements (max needs n >= 1).
float sum_all(const float* x, std::int64_t n);
float max_all(const float* x, std::int64_t n);

// Per-ISA serial runs (reduce{,_avx2,_avx512}.cpp).
using RowSumFn = float (*)(const float* x, std::int64_t n);                     // sum of x[0..n)
using RowMaxFn = float (*)(const float* x, std::int64_t n);                     // max of x[0..n), n >= 1
using ColAccumulateFn = void (*)(const float* x, std::int64_t ld, std::int64_t rows, float* y, std::int64_t cols);
// ^ y[c] += x[r*ld + c] for r = 0..rows-1 in order, c < cols
float row_sum_generic(const float*, std::int64_t);
float row_sum_avx2(const float*, std::int64_t);
float row_sum_avx512(const float*, std::int64_t);
float row_max_generic(const float*, std::int64_t);
float row_max_avx2(const float*, std::int64_t);
float row_max_avx512(const float*, std::int64_t);
void col_accumulate_generic(const float*, std::int64_t, std::int64_t, float*, std::int64_t);
void col_accumulate_avx2(const float*, std::int64_t, std::int64_t, float*, std::int64_t);
void col_accumulate_avx512(const float*, std::int64_t, std::int64_t, float*, std::int64_t);

namespace naive {
// Plain sequential loops (sums in double): the reference.
void row_sum(const float* x, float* y, std::int64_t rows, std::int64_t cols);
void row_max(const float* x, float* y, std::int64_t* idx, std::int64_t rows, std::int64_t cols);
void col_sum(const float* x, float* y, std::int64_t rows, std::int64_t cols);
}  // namespace naive

}  // namespace tfm::kernels
