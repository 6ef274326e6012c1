// Counter-based dropout mask: element i of a stream is kept iff
//   uniform(philox(seed, counter = (2, (offset + i) / 4))[(offset + i) % 4]) >= p,
// a pure function of (seed, offset + i), so the mask is the same whatever the thread count
// and a backward pass can regenerate it instead of storing it.
#pragma once

#include <cstdint>

namespace tfm::kernels {

// y[i] = keep(i) ? x[i] * scale : 0 for i in [0, n). y may alias x. Used for both the
// forward (on x) and the backward (on the incoming gradient, same seed and offset).
void dropout_apply(const float* x, float* y, std::int64_t n, float p, float scale, std::uint64_t seed,
                   std::uint64_t offset);

// Naive twin: one Philox call per element.
bool dropout_keep(std::uint64_t seed, std::uint64_t index, float p);
void dropout_apply_naive(const float* x, float* y, std::int64_t n, float p, float scale, std::uint64_t seed,
                         std::uint64_t offset);

}  // namespace tfm::kernels
