// log(exp(a) + exp(b)) without overflow, -inf as the log of zero: the step of every recursion
// that sums path probabilities in log space (CTC's alpha and beta, its prefix scores).
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>

namespace tfm {

inline double log_add(double a, double b) {
  constexpr double neg_inf = -std::numeric_limits<double>::infinity();
  if (a == neg_inf) return b;
  if (b == neg_inf) return a;
  return std::max(a, b) + std::log1p(std::exp(-std::abs(a - b)));
}

}  // namespace tfm
