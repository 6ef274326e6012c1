// Dropout with a Philox-derived mask (see dropout.h).
#include "kernels/dropout.h"

#include "kernels/parallel.h"
#include "kernels/random.h"

namespace tfm::kernels {
namespace {
// Counter high word 2: a stream apart from fill_uniform (0) and fill_normal (1) of the same seed.
constexpr std::uint64_t kDropoutStream = 2;
}  // namespace

bool dropout_keep(std::uint64_t seed, std::uint64_t index, float p) {
  return uniform_from_bits(philox4x32(seed, kDropoutStream, index / 4)[index % 4]) >= p;
}

void dropout_apply(const float* x, float* y, std::int64_t n, float p, float scale, std::uint64_t seed,
                   std::uint64_t offset) {
  const std::uint32_t keep_from = uniform_threshold(p);  // keep iff (word >> 8) >= keep_from
  parallel_for(n, 1 << 14, [&](std::int64_t begin, std::int64_t end) {
    const float* xs = x + begin;
    float* ys = y + begin;
    for_each_philox_word(seed, kDropoutStream, offset + static_cast<std::uint64_t>(begin), end - begin,
                         [&](std::int64_t i, std::uint32_t word) { ys[i] = (word >> 8) >= keep_from ? xs[i] * scale : 0.0f; });
  });
}

void dropout_apply_naive(const float* x, float* y, std::int64_t n, float p, float scale, std::uint64_t seed,
                         std::uint64_t offset) {
  for (std::int64_t i = 0; i < n; ++i)
    y[i] = dropout_keep(seed, offset + static_cast<std::uint64_t>(i), p) ? x[i] * scale : 0.0f;
}

}  // namespace tfm::kernels
