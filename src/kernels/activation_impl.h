// Template bodies of the activation kernels over simd::Vec<Isa>; included only by
// activation{,_avx2,_avx512}.cpp, each instantiating its own Isa.
#pragma once

#include <cmath>

#include "kernels/activation.h"
#include "kernels/simd/math.h"

namespace tfm::kernels::impl {

constexpr float kSqrt2OverPi = 0.79788456080286536f;  // GELU tanh form: u = k(x + c x^3)
constexpr float kGeluC = 0.044715f;
constexpr float kInvSqrt2Pi = 0.39894228040143268f;  // standard normal pdf factor
constexpr float kQuickGelu = 1.702f;                 // OpenAI CLIP's x·sigmoid(1.702x)

// y = f(x) over one run; tail lanes are loaded with `fill` (a value every f accepts).
template <class V, class F>
void map1(const float* x, float* y, std::int64_t n, F f) {
  std::int64_t i = 0;
  for (; i + V::width <= n; i += V::width) V::store(y + i, f(V::load(x + i)));
  if (i < n) {
    const int rest = static_cast<int>(n - i);
    V::store_partial(y + i, f(V::load_partial(x + i, rest, 1.0f)), rest);
  }
}

// dx = g(x, dy) over one run.
template <class V, class F>
void map2(const float* x, const float* dy, float* dx, std::int64_t n, F f) {
  std::int64_t i = 0;
  for (; i + V::width <= n; i += V::width) V::store(dx + i, f(V::load(x + i), V::load(dy + i)));
  if (i < n) {
    const int rest = static_cast<int>(n - i);
    V::store_partial(dx + i, f(V::load_partial(x + i, rest, 1.0f), V::load_partial(dy + i, rest)), rest);
  }
}

template <class Isa>
void activation_forward(Activation f, const float* x, float* y, std::int64_t n) {
  using V = simd::Vec<Isa>;
  using T = typename V::type;
  const T zero = V::zero(), one = V::set1(1.0f);
  switch (f) {
    case Activation::relu:
      // max(0, v): every Vec's max returns its second operand on NaN, so NaN propagates.
      return map1<V>(x, y, n, [&](T v) { return V::max(zero, v); });
    case Activation::gelu:  // x·Phi(x)
      return map1<V>(x, y, n, [&](T v) { return V::mul(v, simd::normal_cdf<Isa>(v)); });
    case Activation::gelu_tanh:  // 0.5x(1 + tanh u) = x·sigmoid(2u)
      return map1<V>(x, y, n, [&](T v) {
        const T u2 = V::mul(V::mul(V::set1(2.0f * kSqrt2OverPi), v), V::fma(V::mul(v, v), V::set1(kGeluC), one));
        return V::mul(v, simd::sigmoid<Isa>(u2));
      });
    case Activation::quick_gelu:
      return map1<V>(x, y, n, [&](T v) { return V::mul(v, simd::sigmoid<Isa>(V::mul(V::set1(kQuickGelu), v))); });
    case Activation::silu:
      return map1<V>(x, y, n, [&](T v) { return V::mul(v, simd::sigmoid<Isa>(v)); });
    case Activation::sigmoid:
      return map1<V>(x, y, n, [&](T v) { return simd::sigmoid<Isa>(v); });
    case Activation::tanh:
      return map1<V>(x, y, n, [&](T v) { return simd::tanh<Isa>(v); });
    case Activation::exp:
      return map1<V>(x, y, n, [&](T v) { return simd::exp<Isa>(v); });
    case Activation::log:
      // Scalar libm on purpose: log is off the hot path (losses take the log of one value per
      // row), and a vector log would need exponent/mantissa bit access that Vec lacks.
      for (std::int64_t i = 0; i < n; ++i) y[i] = std::log(x[i]);
      return;
  }
}

template <class Isa>
void activation_backward(Activation f, const float* x, const float* dy, float* dx, std::int64_t n) {
  using V = simd::Vec<Isa>;
  using T = typename V::type;
  const T zero = V::zero(), one = V::set1(1.0f);
  switch (f) {
    case Activation::relu:
      return map2<V>(x, dy, dx, n, [&](T v, T g) { return V::select_gt(v, zero, g, zero); });
    case Activation::gelu:  // Phi(x) + x·phi(x)
      return map2<V>(x, dy, dx, n, [&](T v, T g) {
        const T pdf = V::mul(V::set1(kInvSqrt2Pi), simd::exp<Isa>(V::mul(V::set1(-0.5f), V::mul(v, v))));
        return V::mul(g, V::fma(v, pdf, simd::normal_cdf<Isa>(v)));
      });
    case Activation::gelu_tanh:  // s = sigmoid(2u): s + x·2s(1-s)·u'
      return map2<V>(x, dy, dx, n, [&](T v, T g) {
        const T v2 = V::mul(v, v);
        const T u2 = V::mul(V::mul(V::set1(2.0f * kSqrt2OverPi), v), V::fma(v2, V::set1(kGeluC), one));
        const T s = simd::sigmoid<Isa>(u2);
        const T du2 = V::mul(V::set1(2.0f * kSqrt2OverPi), V::fma(v2, V::set1(3.0f * kGeluC), one));
        const T ds = V::mul(V::mul(s, V::sub(one, s)), du2);
        return V::mul(g, V::fma(v, ds, s));
      });
    case Activation::quick_gelu:  // s = sigmoid(ax): s(1 + a x(1-s))
      return map2<V>(x, dy, dx, n, [&](T v, T g) {
        const T av = V::mul(V::set1(kQuickGelu), v);
        const T s = simd::sigmoid<Isa>(av);
        return V::mul(g, V::mul(s, V::fma(av, V::sub(one, s), one)));
      });
    case Activation::silu:  // s(1 + x(1-s))
      return map2<V>(x, dy, dx, n, [&](T v, T g) {
        const T s = simd::sigmoid<Isa>(v);
        return V::mul(g, V::mul(s, V::fma(v, V::sub(one, s), one)));
      });
    case Activation::sigmoid:
      return map2<V>(x, dy, dx, n, [&](T v, T g) {
        const T s = simd::sigmoid<Isa>(v);
        return V::mul(g, V::mul(s, V::sub(one, s)));
      });
    case Activation::tanh:
      return map2<V>(x, dy, dx, n, [&](T v, T g) {
        const T t = simd::tanh<Isa>(v);
        return V::mul(g, V::sub(one, V::mul(t, t)));
      });
    case Activation::exp:
      return map2<V>(x, dy, dx, n, [&](T v, T g) { return V::mul(g, simd::exp<Isa>(v)); });
    case Activation::log:
      return map2<V>(x, dy, dx, n, [&](T v, T g) { return V::div(g, v); });
  }
}

}  // namespace tfm::kernels::impl
