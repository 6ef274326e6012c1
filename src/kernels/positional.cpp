// Positional-encoding kernels (formulas in positional.h). Angles are computed in double: at
// positions in the thousands a float32 angle is off by ~1e-3 rad. (PyTorch references work in
// float32, so parity tests use positions where both agree to ~1e-6.)
#include "kernels/positional.h"

#include <cmath>
#include <vector>

#include "kernels/parallel.h"

namespace tfm::kernels {

void sinusoidal_table(float* out, std::int64_t T, std::int64_t D, std::int64_t start, double base, bool halves) {
  parallel_for(T, 16, [&](std::int64_t t0, std::int64_t t1) {
    for (std::int64_t t = t0; t < t1; ++t) {
      const double p = static_cast<double>(start + t);
      for (std::int64_t i = 0; i < D / 2; ++i) {
        const double angle = p / std::pow(base, static_cast<double>(2 * i) / static_cast<double>(D));
        out[t * D + (halves ? i : 2 * i)] = static_cast<float>(std::sin(angle));
        out[t * D + (halves ? D / 2 + i : 2 * i + 1)] = static_cast<float>(std::cos(angle));
      }
    }
  });
}

void rope_rows(float* x, std::int64_t N, std::int64_t D, const std::int64_t* pos, double base, bool halves,
               bool inverse) {
  const std::int64_t half = D / 2;
  std::vector<double> inv_freq(static_cast<std::size_t>(half));  // base^(-2i/D)
  for (std::int64_t i = 0; i < half; ++i)
    inv_freq[static_cast<std::size_t>(i)] = std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(D));
  parallel_for(N, 8, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      float* row = x + r * D;
      const double p = static_cast<double>(pos[r]);
      for (std::int64_t i = 0; i < half; ++i) {
        const double theta = p * inv_freq[static_cast<std::size_t>(i)];
        const float c = static_cast<float>(std::cos(theta));
        const float s = static_cast<float>(inverse ? -std::sin(theta) : std::sin(theta));
        float* a = halves ? row + i : row + 2 * i;
        float* b = halves ? row + i + half : row + 2 * i + 1;
        const float x0 = *a, x1 = *b;
        *a = x0 * c - x1 * s;
        *b = x1 * c + x0 * s;
      }
    }
  });
}

std::int64_t t5_relative_bucket(std::int64_t rel, bool bidirectional, std::int64_t num_buckets,
                                std::int64_t max_distance) {
  std::int64_t bucket = 0;
  std::int64_t n = num_buckets;
  if (bidirectional) {
    n /= 2;
    if (rel > 0) bucket += n;
    rel = rel < 0 ? -rel : rel;
  } else {
    rel = rel < 0 ? -rel : 0;  // causal: only keys at or before the query
  }
  const std::int64_t max_exact = n / 2;
  if (rel < max_exact) return bucket + rel;
  // Float32 arithmetic as the reference does, so boundary cases land in the same bucket.
  const float scaled = std::log(static_cast<float>(rel) / static_cast<float>(max_exact)) /
                       std::log(static_cast<float>(max_distance) / static_cast<float>(max_exact)) *
                       static_cast<float>(n - max_exact);
  std::int64_t large = max_exact + static_cast<std::int64_t>(scaled);
  if (large > n - 1) large = n - 1;
  return bucket + large;
}

}  // namespace tfm::kernels
