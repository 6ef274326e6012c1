// Per-ISA row kernels behind norm.h, written once over simd::Vec<Isa> (see softmax_rows.h
// for why each ISA file exports a table and everything here has internal linkage).
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/simd/vec.h"

namespace tfm::kernels::norm_rows {

struct Table {
  void (*ln_forward)(const float* x, const float* w, const float* b, float* y, float* mean, float* rstd,
                     std::int64_t rows, std::int64_t cols, float eps);
  // Also adds sum_rows(g * xhat) into dw_acc and sum_rows(g) into db_acc (either may be null).
  void (*ln_backward)(const float* x, const float* w, const float* mean, const float* rstd, const float* g,
                      float* dx, float* dw_acc, float* db_acc, std::int64_t rows, std::int64_t cols);
  void (*rms_forward)(const float* x, const float* w, float* y, float* rstd, std::int64_t rows, std::int64_t cols,
                      float eps);
  void (*rms_backward)(const float* x, const float* w, const float* rstd, const float* g, float* dx,
                       float* dw_acc, std::int64_t rows, std::int64_t cols);
};

extern const Table generic_table;
extern const Table avx2_table;
extern const Table avx512_table;

namespace {

// Loop over a row in vectors: body(i, n) with n == V::width except for one partial tail,
// where load/store go through V::load_partial/store_partial.
template <class V>
struct Lanes {
  static typename V::type load(const float* p, int n) { return n == V::width ? V::load(p) : V::load_partial(p, n); }
  static void store(float* p, typename V::type a, int n) {
    if (n == V::width) V::store(p, a); else V::store_partial(p, a, n);
  }
};

template <class V, class Body>
inline void for_lanes(std::int64_t cols, Body&& body) {
  std::int64_t i = 0;
  for (; i + V::width <= cols; i += V::width) body(i, V::width);
  if (i < cols) body(i, static_cast<int>(cols - i));
}

template <class Isa>
void ln_forward(const float* x, const float* w, const float* b, float* y, float* mean, float* rstd,
                std::int64_t rows, std::int64_t cols, float eps) {
  using V = simd::Vec<Isa>;
  using L = Lanes<V>;
  const float inv_n = 1.0f / static_cast<float>(cols);
  for (std::int64_t r = 0; r < rows; ++r, x += cols, y += cols) {
    auto s = V::zero();
    for_lanes<V>(cols, [&](std::int64_t i, int n) { s = V::add(s, L::load(x + i, n)); });
    const float mu = V::reduce_add(s) * inv_n;
    const auto mv = V::set1(mu);
    auto q = V::zero();  // two-pass variance: sum (x - mean)^2 has no cancellation
    for_lanes<V>(cols, [&](std::int64_t i, int n) {
      const auto d = n == V::width ? V::sub(V::load(x + i), mv) : V::sub(V::load_partial(x + i, n, mu), mv);
      q = V::fma(d, d, q);
    });
    const float rs = 1.0f / std::sqrt(V::reduce_add(q) * inv_n + eps);
    mean[r] = mu;
    rstd[r] = rs;
    const auto rv = V::set1(rs);
    for_lanes<V>(cols, [&](std::int64_t i, int n) {
      auto v = V::mul(V::sub(L::load(x + i, n), mv), rv);
      if (w) v = V::mul(v, L::load(w + i, n));
      if (b) v = V::add(v, L::load(b + i, n));
      L::store(y + i, v, n);
    });
  }
}

template <class Isa>
void ln_backward(const float* x, const float* w, const float* mean, const float* rstd, const float* g, float* dx,
                 float* dw_acc, float* db_acc, std::int64_t rows, std::int64_t cols) {
  using V = simd::Vec<Isa>;
  using L = Lanes<V>;
  const float inv_n = 1.0f / static_cast<float>(cols);
  for (std::int64_t r = 0; r < rows; ++r, x += cols, g += cols) {
    const auto mv = V::set1(mean[r]), rv = V::set1(rstd[r]);
    if (dx) {
      // dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)),  gw = g * w, xhat = (x - mean) * rstd
      auto sa = V::zero(), sb = V::zero();
      for_lanes<V>(cols, [&](std::int64_t i, int n) {
        auto gw = L::load(g + i, n);
        if (w) gw = V::mul(gw, L::load(w + i, n));
        const auto xhat = V::mul(V::sub(L::load(x + i, n), mv), rv);
        sa = V::add(sa, gw);
        sb = V::fma(gw, xhat, sb);
      });
      const auto a = V::set1(V::reduce_add(sa) * inv_n), bb = V::set1(V::reduce_add(sb) * inv_n);
      float* dxr = dx + r * cols;
      for_lanes<V>(cols, [&](std::int64_t i, int n) {
        auto gw = L::load(g + i, n);
        if (w) gw = V::mul(gw, L::load(w + i, n));
        const auto xhat = V::mul(V::sub(L::load(x + i, n), mv), rv);
        L::store(dxr + i, V::mul(rv, V::sub(V::sub(gw, a), V::mul(xhat, bb))), n);
      });
    }
    if (dw_acc || db_acc) {
      for_lanes<V>(cols, [&](std::int64_t i, int n) {
        const auto gv = L::load(g + i, n);
        if (dw_acc) {
          const auto xhat = V::mul(V::sub(L::load(x + i, n), mv), rv);
          L::store(dw_acc + i, V::fma(gv, xhat, L::load(dw_acc + i, n)), n);
        }
        if (db_acc) L::store(db_acc + i, V::add(gv, L::load(db_acc + i, n)), n);
      });
    }
  }
}

template <class Isa>
void rms_forward(const float* x, const float* w, float* y, float* rstd, std::int64_t rows, std::int64_t cols,
                 float eps) {
  using V = simd::Vec<Isa>;
  using L = Lanes<V>;
  const float inv_n = 1.0f / static_cast<float>(cols);
  for (std::int64_t r = 0; r < rows; ++r, x += cols, y += cols) {
    auto q = V::zero();
    for_lanes<V>(cols, [&](std::int64_t i, int n) {
      const auto v = L::load(x + i, n);
      q = V::fma(v, v, q);
    });
    const float rs = 1.0f / std::sqrt(V::reduce_add(q) * inv_n + eps);
    rstd[r] = rs;
    const auto rv = V::set1(rs);
    for_lanes<V>(cols, [&](std::int64_t i, int n) {
      auto v = V::mul(L::load(x + i, n), rv);
      if (w) v = V::mul(v, L::load(w + i, n));
      L::store(y + i, v, n);
    });
  }
}

template <class Isa>
void rms_backward(const float* x, const float* w, const float* rstd, const float* g, float* dx, float* dw_acc,
                  std::int64_t rows, std::int64_t cols) {
  using V = simd::Vec<Isa>;
  using L = Lanes<V>;
  const float inv_n = 1.0f / static_cast<float>(cols);
  for (std::int64_t r = 0; r < rows; ++r, x += cols, g += cols) {
    const auto rv = V::set1(rstd[r]);
    if (dx) {
      // dx = rstd * (gw - xhat * mean(gw * xhat)),  xhat = x * rstd
      auto sb = V::zero();
      for_lanes<V>(cols, [&](std::int64_t i, int n) {
        auto gw = L::load(g + i, n);
        if (w) gw = V::mul(gw, L::load(w + i, n));
        sb = V::fma(gw, V::mul(L::load(x + i, n), rv), sb);
      });
      const auto bb = V::set1(V::reduce_add(sb) * inv_n);
      float* dxr = dx + r * cols;
      for_lanes<V>(cols, [&](std::int64_t i, int n) {
        auto gw = L::load(g + i, n);
        if (w) gw = V::mul(gw, L::load(w + i, n));
        const auto xhat = V::mul(L::load(x + i, n), rv);
        L::store(dxr + i, V::mul(rv, V::sub(gw, V::mul(xhat, bb))), n);
      });
    }
    if (dw_acc) {
      for_lanes<V>(cols, [&](std::int64_t i, int n) {
        const auto xhat = V::mul(L::load(x + i, n), rv);
        L::store(dw_acc + i, V::fma(L::load(g + i, n), xhat, L::load(dw_acc + i, n)), n);
      });
    }
  }
}

template <class Isa>
constexpr Table make_table() {
  return Table{&ln_forward<Isa>, &ln_backward<Isa>, &rms_forward<Isa>, &rms_backward<Isa>};
}

}  // namespace
}  // namespace tfm::kernels::norm_rows
