// Counter-based random numbers (Philox4x32-10, Salmon et al. 2011).
//
// Each value is a pure function of (seed, counter): element i of a tensor always gets the
// same number whatever the thread count or chunking — the property dropout masks and
// initialisation need for bit-reproducible runs.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

#include "kernels/philox.h"

namespace tfm::kernels {

// Calls fn(t, word) for t in [0, n), word being element (first + t)'s word under the layout
// "element idx uses word idx % 4 of counter idx / 4", drawing the words a batch at a time.
template <class Fn>
void for_each_philox_word(std::uint64_t key, std::uint64_t counter_hi, std::uint64_t first, std::int64_t n, Fn&& fn) {
  constexpr std::int64_t kBlocks = 64;
  std::uint32_t words[4 * kBlocks];
  for (std::int64_t t = 0; t < n;) {
    const std::uint64_t idx = first + static_cast<std::uint64_t>(t);
    const auto skip = static_cast<std::int64_t>(idx % 4);
    const std::int64_t take = std::min(n - t, 4 * kBlocks - skip);
    philox4x32_blocks(key, counter_hi, idx / 4, (skip + take + 3) / 4, words);
    for (std::int64_t k = 0; k < take; ++k) fn(t + k, words[skip + k]);
    t += take;
  }
}

// Uniform float in [0, 1) from a 32-bit word (24 random mantissa bits).
inline float uniform_from_bits(std::uint32_t bits) { return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f); }

// The integer form of uniform_from_bits(bits) >= p, for p in [0, 1]: (bits >> 8) >= t.
// Exact: (bits >> 8) * 2^-24 and p * 2^24 are both exact in float/double.
inline std::uint32_t uniform_threshold(float p) {
  const double t = std::ceil(static_cast<double>(p) * 16777216.0);
  return t <= 0.0 ? 0u : t >= 16777216.0 ? 16777216u : static_cast<std::uint32_t>(t);
}

// out[i] for i in [0, n) from stream `seed`, element index offset+i.
void fill_uniform(float* out, std::int64_t n, std::uint64_t seed, std::uint64_t offset, float lo, float hi);
void fill_normal(float* out, std::int64_t n, std::uint64_t seed, std::uint64_t offset, float mean, float std);

}  // namespace tfm::kernels
