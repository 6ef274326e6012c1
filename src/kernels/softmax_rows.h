// Per-ISA row kernels behind softmax.h, written once over simd::Vec<Isa>.
//
// Each ISA's file (softmax.cpp, softmax_avx2.cpp, softmax_avx512.cpp) includes this header
// and exports one Table built from the templates below. The table functions run a range of
// rows on the calling thread; threading, allocation and dispatch stay in softmax.cpp, which
// is compiled for the baseline ISA. Everything here has internal linkage so no copy built
// with AVX-512 flags can be picked by the linker for a baseline caller.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/simd/math.h"
#include "kernels/simd/vec.h"

namespace tfm::kernels::softmax_rows {

struct Table {
  void (*forward)(const float* x, float* y, std::int64_t rows, std::int64_t cols);
  void (*log_forward)(const float* x, float* y, std::int64_t rows, std::int64_t cols);
  void (*backward)(const float* y, const float* g, float* dx, std::int64_t rows, std::int64_t cols);
  void (*log_backward)(const float* y, const float* g, float* dx, std::int64_t rows, std::int64_t cols);
  void (*ce_forward)(const float* x, const std::int64_t* target, float* loss, float* lse, std::int64_t rows,
                     std::int64_t cols, std::int64_t ignore_index, float eps);
  void (*ce_backward)(const float* x, const std::int64_t* target, const float* lse, const float* scale,
                      float* dx, std::int64_t rows, std::int64_t cols, std::int64_t ignore_index, float eps);
};

extern const Table generic_table;
extern const Table avx2_table;    // defined only in builds whose compiler targets AVX2
extern const Table avx512_table;

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// The row's max, or NaN when the row holds a NaN or +inf (PyTorch's softmax is NaN there
// too). max() alone would drop a NaN (x86 max returns its second operand when either is
// NaN), so a side sum of max(lowest, x) * 0 carries it: 0 for finite x and -inf (masks
// stay cheap), NaN for NaN and +inf.
template <class Isa>
float row_max(const float* x, std::int64_t n) {
  using V = simd::Vec<Isa>;
  auto m = V::set1(kNegInf), bad = V::zero();
  const auto lowest = V::set1(std::numeric_limits<float>::lowest()), zero = V::zero();
  std::int64_t i = 0;
  auto step = [&](typename V::type v) {
    m = V::max(m, v);
    bad = V::add(bad, V::mul(V::max(lowest, v), zero));
  };
  for (; i + V::width <= n; i += V::width) step(V::load(x + i));
  if (i < n) step(V::load_partial(x + i, static_cast<int>(n - i), kNegInf));
  return V::reduce_max(m) + V::reduce_add(bad);
}

// sum(exp(x - m)); when y is given also stores the exps there. Tail lanes load -inf -> exp 0.
template <class Isa>
float row_sum_exp(const float* x, float m, float* y, std::int64_t n) {
  using V = simd::Vec<Isa>;
  const auto mv = V::set1(m);
  auto s = V::zero();
  std::int64_t i = 0;
  for (; i + V::width <= n; i += V::width) {
    const auto e = simd::exp<Isa>(V::sub(V::load(x + i), mv));
    if (y) V::store(y + i, e);
    s = V::add(s, e);
  }
  if (i < n) {
    const int r = static_cast<int>(n - i);
    const auto e = simd::exp<Isa>(V::sub(V::load_partial(x + i, r, kNegInf), mv));
    if (y) V::store_partial(y + i, e, r);
    s = V::add(s, e);
  }
  return V::reduce_add(s);
}

template <class Isa>
float row_dot(const float* a, const float* b, std::int64_t n) {
  using V = simd::Vec<Isa>;
  auto s = V::zero();
  std::int64_t i = 0;
  for (; i + V::width <= n; i += V::width) s = V::fma(V::load(a + i), V::load(b + i), s);
  if (i < n) {
    const int r = static_cast<int>(n - i);
    s = V::fma(V::load_partial(a + i, r), V::load_partial(b + i, r), s);
  }
  return V::reduce_add(s);
}

template <class Isa>
float row_sum(const float* a, std::int64_t n) {
  using V = simd::Vec<Isa>;
  auto s = V::zero();
  std::int64_t i = 0;
  for (; i + V::width <= n; i += V::width) s = V::add(s, V::load(a + i));
  if (i < n) s = V::add(s, V::load_partial(a + i, static_cast<int>(n - i)));
  return V::reduce_add(s);
}

// y = a * x + b elementwise over a row (a, b scalars); y may alias x.
template <class Isa>
void row_affine(const float* x, float a, float b, float* y, std::int64_t n) {
  using V = simd::Vec<Isa>;
  const auto av = V::set1(a), bv = V::set1(b);
  std::int64_t i = 0;
  for (; i + V::width <= n; i += V::width) V::store(y + i, V::fma(V::load(x + i), av, bv));
  if (i < n) {
    const int r = static_cast<int>(n - i);
    V::store_partial(y + i, V::fma(V::load_partial(x + i, r), av, bv), r);
  }
}

template <class Isa>
void forward(const float* x, float* y, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = 0; r < rows; ++r, x += cols, y += cols) {
    const float m = row_max<Isa>(x, cols);
    const float s = row_sum_exp<Isa>(x, m, y, cols);
    row_affine<Isa>(y, 1.0f / s, 0.0f, y, cols);
  }
}

template <class Isa>
void log_forward(const float* x, float* y, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = 0; r < rows; ++r, x += cols, y += cols) {
    const float m = row_max<Isa>(x, cols);
    const float lse = m + std::log(row_sum_exp<Isa>(x, m, nullptr, cols));
    row_affine<Isa>(x, 1.0f, -lse, y, cols);
  }
}

template <class Isa>
void backward(const float* y, const float* g, float* dx, std::int64_t rows, std::int64_t cols) {
  using V = simd::Vec<Isa>;
  for (std::int64_t r = 0; r < rows; ++r, y += cols, g += cols, dx += cols) {
    const auto dot = V::set1(row_dot<Isa>(g, y, cols));
    std::int64_t i = 0;
    for (; i + V::width <= cols; i += V::width)
      V::store(dx + i, V::mul(V::load(y + i), V::sub(V::load(g + i), dot)));
    if (i < cols) {
      const int n = static_cast<int>(cols - i);
      V::store_partial(dx + i, V::mul(V::load_partial(y + i, n), V::sub(V::load_partial(g + i, n), dot)), n);
    }
  }
}

template <class Isa>
void log_backward(const float* y, const float* g, float* dx, std::int64_t rows, std::int64_t cols) {
  using V = simd::Vec<Isa>;
  for (std::int64_t r = 0; r < rows; ++r, y += cols, g += cols, dx += cols) {
    const auto sg = V::set1(row_sum<Isa>(g, cols));
    std::int64_t i = 0;
    // dx = g - exp(y) * sum(g)  ==  fma(-exp(y), sg, g)
    for (; i + V::width <= cols; i += V::width)
      V::store(dx + i, V::fma(V::sub(V::zero(), simd::exp<Isa>(V::load(y + i))), sg, V::load(g + i)));
    if (i < cols) {
      const int n = static_cast<int>(cols - i);
      const auto e = simd::exp<Isa>(V::load_partial(y + i, n));
      V::store_partial(dx + i, V::fma(V::sub(V::zero(), e), sg, V::load_partial(g + i, n)), n);
    }
  }
}

// sum(m - x) over a row: every term >= 0, so the smoothing term has no cancellation.
template <class Isa>
float row_sum_gap(const float* x, float m, std::int64_t n) {
  using V = simd::Vec<Isa>;
  const auto mv = V::set1(m);
  auto s = V::zero();
  std::int64_t i = 0;
  for (; i + V::width <= n; i += V::width) s = V::add(s, V::sub(mv, V::load(x + i)));
  if (i < n) s = V::add(s, V::sub(mv, V::load_partial(x + i, static_cast<int>(n - i), m)));
  return V::reduce_add(s);
}

template <class Isa>
void ce_forward(const float* x, const std::int64_t* target, float* loss, float* lse, std::int64_t rows,
                std::int64_t cols, std::int64_t ignore_index, float eps) {
  for (std::int64_t r = 0; r < rows; ++r, x += cols) {
    const float m = row_max<Isa>(x, cols);
    const float log_s = std::log(row_sum_exp<Isa>(x, m, nullptr, cols));
    lse[r] = m + log_s;
    const std::int64_t t = target[r];
    if (t == ignore_index) {
      loss[r] = 0.0f;
      continue;
    }
    // lse - x[t] = (m - x[t]) + log_s;  sum_v (lse - x[v]) = sum_v (m - x[v]) + cols * log_s
    const float nll = (m - x[t]) + log_s;
    float l = (1.0f - eps) * nll;
    if (eps != 0.0f) {
      const float smooth = row_sum_gap<Isa>(x, m, cols) + static_cast<float>(cols) * log_s;
      l += eps / static_cast<float>(cols) * smooth;
    }
    loss[r] = l;
  }
}

template <class Isa>
void ce_backward(const float* x, const std::int64_t* target, const float* lse, const float* scale, float* dx,
                 std::int64_t rows, std::int64_t cols, std::int64_t ignore_index, float eps) {
  using V = simd::Vec<Isa>;
  for (std::int64_t r = 0; r < rows; ++r, x += cols, dx += cols) {
    const std::int64_t t = target[r];
    const float s = t == ignore_index ? 0.0f : scale[r];
    const auto sv = V::set1(s), lv = V::set1(lse[r]), uniform = V::set1(s * eps / static_cast<float>(cols));
    // dx = s * exp(x - lse) - s * eps / cols
    std::int64_t i = 0;
    for (; i + V::width <= cols; i += V::width)
      V::store(dx + i, V::sub(V::mul(sv, simd::exp<Isa>(V::sub(V::load(x + i), lv))), uniform));
    if (i < cols) {
      const int n = static_cast<int>(cols - i);
      const auto e = simd::exp<Isa>(V::sub(V::load_partial(x + i, n), lv));
      V::store_partial(dx + i, V::sub(V::mul(sv, e), uniform), n);
    }
    if (s != 0.0f) dx[t] -= s * (1.0f - eps);
  }
}

template <class Isa>
constexpr Table make_table() {
  return Table{&forward<Isa>, &log_forward<Isa>, &backward<Isa>, &log_backward<Isa>, &ce_forward<Isa>,
               &ce_backward<Isa>};
}

}  // namespace
}  // namespace tfm::kernels::softmax_rows
