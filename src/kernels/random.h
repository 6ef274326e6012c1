// Counter-based random numbers (Philox4x32-10, Salmon et al. 2011).
//
// Each value is a pure function of (seed, counter): element i of a tensor always gets the
// same number whatever the thread count or chunking — the property dropout masks and
// initialisation need for bit-reproducible runs.
#pragma once

#include <array>
#include <cstdint>

namespace tfm::kernels {

// Four 32-bit random words for (key, counter).
std::array<std::uint32_t, 4> philox4x32(std::uint64_t key, std::uint64_t counter_hi, std::uint64_t counter_lo);

// Uniform float in [0, 1) from a 32-bit word (24 random mantissa bits).
inline float uniform_from_bits(std::uint32_t bits) { return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f); }

// out[i] for i in [0, n) from stream `seed`, element index offset+i.
void fill_uniform(float* out, std::int64_t n, std::uint64_t seed, std::uint64_t offset, float lo, float hi);
void fill_normal(float* out, std::int64_t n, std::uint64_t seed, std::uint64_t offset, float mean, float std);

}  // namespace tfm::kernels
