// Template bodies of the reduction kernels over simd::Vec<Isa>; included only by
// reduce{,_avx2,_avx512}.cpp, each instantiating its own Isa.
#pragma once

#include <cstdint>

#include "kernels/simd/vec.h"

namespace tfm::kernels::impl {

// Four independent accumulators hide the add latency; they are combined in a fixed tree.
template <class Isa>
float row_sum(const float* x, std::int64_t n) {
  using V = simd::Vec<Isa>;
  auto a0 = V::zero(), a1 = V::zero(), a2 = V::zero(), a3 = V::zero();
  std::int64_t i = 0;
  for (; i + 4 * V::width <= n; i += 4 * V::width) {
    a0 = V::add(a0, V::load(x + i));
    a1 = V::add(a1, V::load(x + i + V::width));
    a2 = V::add(a2, V::load(x + i + 2 * V::width));
    a3 = V::add(a3, V::load(x + i + 3 * V::width));
  }
  for (; i + V::width <= n; i += V::width) a0 = V::add(a0, V::load(x + i));
  if (i < n) a1 = V::add(a1, V::load_partial(x + i, static_cast<int>(n - i)));
  return V::reduce_add(V::add(V::add(a0, a1), V::add(a2, a3)));
}

template <class Isa>
float row_max(const float* x, std::int64_t n) {
  using V = simd::Vec<Isa>;
  auto m0 = V::set1(x[0]), m1 = m0;
  std::int64_t i = 0;
  for (; i + 2 * V::width <= n; i += 2 * V::width) {
    m0 = V::max(m0, V::load(x + i));
    m1 = V::max(m1, V::load(x + i + V::width));
  }
  for (; i + V::width <= n; i += V::width) m0 = V::max(m0, V::load(x + i));
  if (i < n) m1 = V::max(m1, V::load_partial(x + i, static_cast<int>(n - i), x[0]));
  return V::reduce_max(V::max(m0, m1));
}

// y[c] += x[r*ld + c], rows in order: vertical adds, so every column is summed top to bottom.
template <class Isa>
void col_accumulate(const float* x, std::int64_t ld, std::int64_t rows, float* y, std::int64_t cols) {
  using V = simd::Vec<Isa>;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * ld;
    std::int64_t c = 0;
    for (; c + V::width <= cols; c += V::width) V::store(y + c, V::add(V::load(y + c), V::load(xr + c)));
    if (c < cols) {
      const int rest = static_cast<int>(cols - c);
      V::store_partial(y + c, V::add(V::load_partial(y + c, rest), V::load_partial(xr + c, rest)), rest);
    }
  }
}

}  // namespace tfm::kernels::impl
