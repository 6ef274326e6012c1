// AVX2 build of philox4x32_blocks: 4 counters per vector, one per 64-bit lane (the 32-bit
// state words sit in the low halves so _mm256_mul_epu32 gives the full 64-bit products).
#include <immintrin.h>

#include "kernels/philox.h"

namespace tfm::kernels {

void philox4x32_blocks_avx2(std::uint64_t key, std::uint64_t counter_hi, std::uint64_t first, std::int64_t n_blocks,
                            std::uint32_t* out) {
  const __m256i m0 = _mm256_set1_epi64x(philox::kM0), m1 = _mm256_set1_epi64x(philox::kM1);
  const __m256i low32 = _mm256_set1_epi64x(0xFFFFFFFF);
  const __m256i lane = _mm256_setr_epi64x(0, 1, 2, 3);
  const __m256i hi0 = _mm256_set1_epi64x(static_cast<std::uint32_t>(counter_hi));
  const __m256i hi1 = _mm256_set1_epi64x(static_cast<std::uint32_t>(counter_hi >> 32));
  std::int64_t j = 0;
  for (; j + 4 <= n_blocks; j += 4) {
    const __m256i ctr =
        _mm256_add_epi64(_mm256_set1_epi64x(static_cast<long long>(first + static_cast<std::uint64_t>(j))), lane);
    __m256i c0 = _mm256_and_si256(ctr, low32), c1 = _mm256_srli_epi64(ctr, 32), c2 = hi0, c3 = hi1;
    std::uint32_t k0 = static_cast<std::uint32_t>(key), k1 = static_cast<std::uint32_t>(key >> 32);
    for (int round = 0; round < philox::kRounds; ++round) {
      const __m256i p0 = _mm256_mul_epu32(c0, m0), p1 = _mm256_mul_epu32(c2, m1);
      const __m256i n0 = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p1, 32), c1), _mm256_set1_epi64x(k0));
      const __m256i n2 = _mm256_xor_si256(_mm256_xor_si256(_mm256_srli_epi64(p0, 32), c3), _mm256_set1_epi64x(k1));
      c1 = _mm256_and_si256(p1, low32);
      c3 = _mm256_and_si256(p0, low32);
      c0 = n0;
      c2 = n2;
      k0 += philox::kW0;
      k1 += philox::kW1;
    }
    // out[4 j + w]: the 64-bit words (c0 | c1 << 32) and (c2 | c3 << 32) of each block, in turn.
    const __m256i w01 = _mm256_or_si256(c0, _mm256_slli_epi64(c1, 32));
    const __m256i w23 = _mm256_or_si256(c2, _mm256_slli_epi64(c3, 32));
    const __m256i lo = _mm256_unpacklo_epi64(w01, w23);  // blocks 0 and 2
    const __m256i hi = _mm256_unpackhi_epi64(w01, w23);  // blocks 1 and 3
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 4 * j), _mm256_permute2x128_si256(lo, hi, 0x20));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + 4 * j + 8), _mm256_permute2x128_si256(lo, hi, 0x31));
  }
  if (j < n_blocks) philox4x32_blocks_generic(key, counter_hi, first + static_cast<std::uint64_t>(j), n_blocks - j, out + 4 * j);
}

}  // namespace tfm::kernels
