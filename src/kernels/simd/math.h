// Vectorised transcendental functions written once over simd::Vec<Isa>.
#pragma once

#include "kernels/simd/vec.h"

namespace tfm::kernels::simd {

// exp(x): range reduction x = n·ln2 + r, |r| <= ln2/2, then a degree-6 polynomial for e^r
// (Cephes expf coefficients); max relative error ~2 ulp over [-87.3, 88.7]. Inputs below
// -87.3 return 0 (softmax relies on exp(-inf) == 0), above 88.7 return +inf.
template <class Isa>
typename Vec<Isa>::type exp(typename Vec<Isa>::type x) {
  using V = Vec<Isa>;
  const auto hi = V::set1(88.7228f), lo = V::set1(-87.3365f);
  // Operand order matters: x86 min/max return the SECOND operand when either is NaN, so
  // putting x second lets a NaN input through the clamp and out as NaN (not a silent 0).
  const auto xc = V::min(hi, V::max(lo, x));
  const auto n = V::round(V::mul(xc, V::set1(1.44269504088896341f)));
  // r = x - n*ln2 in two steps (ln2 split high/low) to keep r accurate.
  auto r = V::fma(n, V::set1(-0.693359375f), xc);
  r = V::fma(n, V::set1(2.12194440e-4f), r);
  auto p = V::set1(1.9875691500e-4f);
  p = V::fma(p, r, V::set1(1.3981999507e-3f));
  p = V::fma(p, r, V::set1(8.3334519073e-3f));
  p = V::fma(p, r, V::set1(4.1665795894e-2f));
  p = V::fma(p, r, V::set1(1.6666665459e-1f));
  p = V::fma(p, r, V::set1(5.0000001201e-1f));
  const auto r2 = V::mul(r, r);
  p = V::fma(p, r2, V::add(r, V::set1(1.0f)));
  // 2^n: n in [-126, 128]; split as 2^(n/2)·2^(n-n/2) so n = 128 cannot overflow the exponent.
  const auto half = V::round(V::mul(n, V::set1(0.5f)));
  auto y = V::mul(V::mul(p, V::pow2i(half)), V::pow2i(V::sub(n, half)));
  y = V::select_gt(lo, x, V::zero(), y);                      // underflow -> 0
  y = V::select_gt(x, hi, V::set1(__builtin_inff()), y);      // overflow -> inf
  return y;
}

// sigmoid(x) = 1 / (1 + e^-x). exp(-x) saturates to +inf for x < -88.7, giving exactly 0.
template <class Isa>
typename Vec<Isa>::type sigmoid(typename Vec<Isa>::type x) {
  using V = Vec<Isa>;
  const auto one = V::set1(1.0f);
  return V::div(one, V::add(one, exp<Isa>(V::sub(V::zero(), x))));
}

// tanh(x): Cephes tanhf. |x| < 0.625: x + x^3·P(x^2) (keeps relative accuracy near 0, where
// the exp form would cancel); otherwise 1 - 2/(e^{2|x|} + 1) with the sign put back.
// Max error ~2 ulp; saturates to ±1 without overflow (e^{2|x|} -> inf gives 1 - 0).
template <class Isa>
typename Vec<Isa>::type tanh(typename Vec<Isa>::type x) {
  using V = Vec<Isa>;
  const auto z = V::abs(x);
  const auto s = V::mul(x, x);
  auto p = V::set1(-5.70498872745e-3f);
  p = V::fma(p, s, V::set1(2.06390887954e-2f));
  p = V::fma(p, s, V::set1(-5.37397155531e-2f));
  p = V::fma(p, s, V::set1(1.33314422036e-1f));
  p = V::fma(p, s, V::set1(-3.33332819422e-1f));
  const auto small = V::fma(V::mul(p, s), x, x);
  const auto one = V::set1(1.0f);
  const auto big_abs = V::sub(one, V::div(V::set1(2.0f), V::add(exp<Isa>(V::add(z, z)), one)));
  const auto big = V::select_gt(V::zero(), x, V::sub(V::zero(), big_abs), big_abs);
  return V::select_gt(V::set1(0.625f), z, small, big);
}

// erfc(z) for z >= 0 (Numerical Recipes' erfcc, a Chebyshev fit): fractional error < 1.2e-7
// over the whole range, so the small tail values GELU needs for negative x stay accurate in
// relative terms (an erf-then-subtract form would lose them to cancellation).
//   t = 1/(1 + z/2);  erfc(z) = t·exp(-z^2 - 1.26551223 + t·P(t))
template <class Isa>
typename Vec<Isa>::type erfc_nonneg(typename Vec<Isa>::type z) {
  using V = Vec<Isa>;
  const auto t = V::div(V::set1(1.0f), V::fma(z, V::set1(0.5f), V::set1(1.0f)));
  auto p = V::set1(0.17087277f);
  p = V::fma(p, t, V::set1(-0.82215223f));
  p = V::fma(p, t, V::set1(1.48851587f));
  p = V::fma(p, t, V::set1(-1.13520398f));
  p = V::fma(p, t, V::set1(0.27886807f));
  p = V::fma(p, t, V::set1(-0.18628806f));
  p = V::fma(p, t, V::set1(0.09678418f));
  p = V::fma(p, t, V::set1(0.37409196f));
  p = V::fma(p, t, V::set1(1.00002368f));
  p = V::fma(p, t, V::set1(-1.26551223f));
  return V::mul(t, exp<Isa>(V::sub(p, V::mul(z, z))));
}

// Phi(x) = P(N(0,1) <= x) = erfc(-x/sqrt2)/2, from erfc of |x|/sqrt2 by symmetry.
template <class Isa>
typename Vec<Isa>::type normal_cdf(typename Vec<Isa>::type x) {
  using V = Vec<Isa>;
  const auto half_e = V::mul(V::set1(0.5f), erfc_nonneg<Isa>(V::mul(V::abs(x), V::set1(0.70710678118654752f))));
  return V::select_gt(x, V::zero(), V::sub(V::set1(1.0f), half_e), half_e);
}

}  // namespace tfm::kernels::simd
