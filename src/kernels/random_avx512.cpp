// AVX-512 build of philox4x32_blocks: 8 counters per vector, one per 64-bit lane (the 32-bit
// state words sit in the low halves so _mm512_mul_epu32 gives the full 64-bit products).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include "kernels/philox.h"

namespace tfm::kernels {

void philox4x32_blocks_avx512(std::uint64_t key, std::uint64_t counter_hi, std::uint64_t first,
                              std::int64_t n_blocks, std::uint32_t* out) {
  const __m512i m0 = _mm512_set1_epi64(philox::kM0), m1 = _mm512_set1_epi64(philox::kM1);
  const __m512i low32 = _mm512_set1_epi64(0xFFFFFFFF);
  const __m512i lane = _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7);
  const __m512i hi0 = _mm512_set1_epi64(static_cast<std::uint32_t>(counter_hi));
  const __m512i hi1 = _mm512_set1_epi64(static_cast<std::uint32_t>(counter_hi >> 32));
  std::int64_t j = 0;
  for (; j + 8 <= n_blocks; j += 8) {
    const __m512i ctr = _mm512_add_epi64(_mm512_set1_epi64(static_cast<long long>(first + static_cast<std::uint64_t>(j))), lane);
    __m512i c0 = _mm512_and_si512(ctr, low32), c1 = _mm512_srli_epi64(ctr, 32), c2 = hi0, c3 = hi1;
    std::uint32_t k0 = static_cast<std::uint32_t>(key), k1 = static_cast<std::uint32_t>(key >> 32);
    for (int round = 0; round < philox::kRounds; ++round) {
      const __m512i p0 = _mm512_mul_epu32(c0, m0), p1 = _mm512_mul_epu32(c2, m1);
      const __m512i n0 = _mm512_xor_si512(_mm512_xor_si512(_mm512_srli_epi64(p1, 32), c1), _mm512_set1_epi64(k0));
      const __m512i n2 = _mm512_xor_si512(_mm512_xor_si512(_mm512_srli_epi64(p0, 32), c3), _mm512_set1_epi64(k1));
      c1 = _mm512_and_si512(p1, low32);
      c3 = _mm512_and_si512(p0, low32);
      c0 = n0;
      c2 = n2;
      k0 += philox::kW0;
      k1 += philox::kW1;
    }
    // out[4 j + w]: the 64-bit words (c0 | c1 << 32) and (c2 | c3 << 32) of each block, in turn.
    const __m512i w01 = _mm512_or_si512(c0, _mm512_slli_epi64(c1, 32));
    const __m512i w23 = _mm512_or_si512(c2, _mm512_slli_epi64(c3, 32));
    const __m512i first_half = _mm512_permutex2var_epi64(w01, _mm512_setr_epi64(0, 8, 1, 9, 2, 10, 3, 11), w23);
    const __m512i second_half = _mm512_permutex2var_epi64(w01, _mm512_setr_epi64(4, 12, 5, 13, 6, 14, 7, 15), w23);
    _mm512_storeu_si512(out + 4 * j, first_half);
    _mm512_storeu_si512(out + 4 * j + 16, second_half);
  }
  if (j < n_blocks) philox4x32_blocks_generic(key, counter_hi, first + static_cast<std::uint64_t>(j), n_blocks - j, out + 4 * j);
}

}  // namespace tfm::kernels
