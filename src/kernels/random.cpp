// Philox4x32-10 and the uniform / normal fills built on it.
#include "kernels/random.h"

#include <cmath>

#include "kernels/dispatch.h"
#include "kernels/parallel.h"

namespace tfm::kernels {

std::array<std::uint32_t, 4> philox4x32(std::uint64_t key, std::uint64_t counter_hi, std::uint64_t counter_lo) {
  using namespace philox;
  std::uint32_t c0 = static_cast<std::uint32_t>(counter_lo), c1 = static_cast<std::uint32_t>(counter_lo >> 32);
  std::uint32_t c2 = static_cast<std::uint32_t>(counter_hi), c3 = static_cast<std::uint32_t>(counter_hi >> 32);
  std::uint32_t k0 = static_cast<std::uint32_t>(key), k1 = static_cast<std::uint32_t>(key >> 32);
  for (int round = 0; round < kRounds; ++round) {
    const std::uint64_t p0 = static_cast<std::uint64_t>(kM0) * c0;
    const std::uint64_t p1 = static_cast<std::uint64_t>(kM1) * c2;
    const std::uint32_t n0 = static_cast<std::uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const std::uint32_t n2 = static_cast<std::uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<std::uint32_t>(p1);
    c3 = static_cast<std::uint32_t>(p0);
    c0 = n0;
    c2 = n2;
    k0 += kW0;
    k1 += kW1;
  }
  return {c0, c1, c2, c3};
}

void philox4x32_blocks_generic(std::uint64_t key, std::uint64_t counter_hi, std::uint64_t first,
                               std::int64_t n_blocks, std::uint32_t* out) {
  for (std::int64_t j = 0; j < n_blocks; ++j) {
    const auto r = philox4x32(key, counter_hi, first + static_cast<std::uint64_t>(j));
    for (int w = 0; w < 4; ++w) out[4 * j + w] = r[static_cast<std::size_t>(w)];
  }
}

void philox4x32_blocks(std::uint64_t key, std::uint64_t counter_hi, std::uint64_t first, std::int64_t n_blocks,
                       std::uint32_t* out) {
  const auto fn = pick_isa(&philox4x32_blocks_generic, &philox4x32_blocks_avx2, &philox4x32_blocks_avx512);
  fn(key, counter_hi, first, n_blocks, out);
}

void fill_uniform(float* out, std::int64_t n, std::uint64_t seed, std::uint64_t offset, float lo, float hi) {
  // Block of 4 elements per Philox call; element j uses word j%4 of counter j/4.
  parallel_for(n, 4096, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      const std::uint64_t idx = offset + static_cast<std::uint64_t>(i);
      const auto r = philox4x32(seed, 0, idx / 4);
      out[i] = lo + (hi - lo) * uniform_from_bits(r[idx % 4]);
    }
  });
}

void fill_normal(float* out, std::int64_t n, std::uint64_t seed, std::uint64_t offset, float mean, float std) {
  // Box–Muller on two words of counter idx; uses the stream's high counter word = 1 so the
  // normal and uniform streams of one seed never overlap.
  parallel_for(n, 4096, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      const std::uint64_t idx = offset + static_cast<std::uint64_t>(i);
      const auto r = philox4x32(seed, 1, idx);
      const double u1 = (static_cast<double>(r[0]) + 1.0) / 4294967297.0;  // (0, 1)
      const double u2 = static_cast<double>(r[1]) / 4294967296.0;
      const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
      out[i] = mean + std * static_cast<float>(z);
    }
  });
}

}  // namespace tfm::kernels
