// Philox4x32-10 (Salmon et al. 2011): its constants and the block generators, one per ISA.
// Kept apart from random.h (which has inline helpers) so the AVX2 / AVX-512 translation
// units include no non-template inline function that the linker could pick for baseline
// callers (see simd/vec.h).
#pragma once

#include <array>
#include <cstdint>

namespace tfm::kernels::philox {
constexpr std::uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;  // round multipliers
constexpr std::uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;  // key schedule (Weyl) increments
constexpr int kRounds = 10;
}  // namespace tfm::kernels::philox

namespace tfm::kernels {

// Four 32-bit random words for (key, counter).
std::array<std::uint32_t, 4> philox4x32(std::uint64_t key, std::uint64_t counter_hi, std::uint64_t counter_lo);

// The words of n_blocks consecutive counters, in order:
//   out[4 j + w] = philox4x32(key, counter_hi, first + j)[w]   for j in [0, n_blocks).
// Dropout draws one word per element, so this runs once per element a mask touches; the
// AVX2 / AVX-512 builds run 4 / 8 counters per instruction (philox4x32 is their naive twin).
void philox4x32_blocks(std::uint64_t key, std::uint64_t counter_hi, std::uint64_t first, std::int64_t n_blocks,
                       std::uint32_t* out);
void philox4x32_blocks_generic(std::uint64_t key, std::uint64_t counter_hi, std::uint64_t first,
                               std::int64_t n_blocks, std::uint32_t* out);
void philox4x32_blocks_avx2(std::uint64_t key, std::uint64_t counter_hi, std::uint64_t first, std::int64_t n_blocks,
                            std::uint32_t* out);
void philox4x32_blocks_avx512(std::uint64_t key, std::uint64_t counter_hi, std::uint64_t first,
                              std::int64_t n_blocks, std::uint32_t* out);

}  // namespace tfm::kernels
