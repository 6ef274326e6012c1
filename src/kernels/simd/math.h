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

}  // namespace tfm::kernels::simd
