// Template body of the optimizer kernels over simd::Vec<Isa>; included only by
// optimizer{,_avx2,_avx512}.cpp, each instantiating its own Isa.
#pragma once

#include <cstdint>

#include "kernels/optimizer.h"
#include "kernels/simd/vec.h"

namespace tfm::kernels::impl {

template <class Isa>
void adamw_update(float* w, const float* g, float* m, float* v, std::int64_t n, const AdamWScalars& s) {
  using V = simd::Vec<Isa>;
  const auto decay = V::set1(s.decay), b1 = V::set1(s.b1), a1 = V::set1(s.a1), b2 = V::set1(s.b2),
             a2 = V::set1(s.a2), neg_step = V::set1(-s.step_size), bc2 = V::set1(s.bc2_sqrt), eps = V::set1(s.eps);
  auto body = [&](std::int64_t i, int lanes) {
    const bool full = lanes == V::width;
    auto ld = [&](const float* p) { return full ? V::load(p + i) : V::load_partial(p + i, lanes); };
    auto st = [&](float* p, typename V::T x) {
      if (full)
        V::store(p + i, x);
      else
        V::store_partial(p + i, x, lanes);
    };
    auto wi = ld(w);
    const auto gi = ld(g);
    if (s.apply_decay) wi = V::mul(wi, decay);
    const auto mi = V::add(V::mul(ld(m), b1), V::mul(gi, a1));
    const auto vi = V::add(V::mul(ld(v), b2), V::mul(V::mul(gi, gi), a2));
    const auto denom = V::add(V::div(V::sqrt(vi), bc2), eps);
    st(w, V::add(wi, V::mul(neg_step, V::div(mi, denom))));
    st(m, mi);
    st(v, vi);
  };
  std::int64_t i = 0;
  for (; i + V::width <= n; i += V::width) body(i, V::width);
  if (i < n) body(i, static_cast<int>(n - i));
}

}  // namespace tfm::kernels::impl
