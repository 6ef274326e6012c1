// Rounding f32 to bf16 pairs in registers, for the kernels that feed VDPBF16PS (the native
// bf16 GEMM and the bf16 fused attention). Include only from files built with -mavx512bf16.
//
// A pair word holds bf16(element 2i) in its low half and bf16(element 2i+1) in its high half.
// VCVTNE2PS2BF16 rounds to nearest even, quiets NaNs and treats denormal inputs as zero — the
// rule of gemm_bf16_isa::bf16_bits() (gemm_bf16_impl.h), bit for bit: checked over all 2^32
// inputs when this was written; tests/unit/kernels/test_gemm_bf16.cpp checks ties, denormals and NaNs
// through every packing path against the scalar rule.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace tfm::kernels::bf16_pairs {

// The first n of 16 lanes (none for n <= 0, all for n >= 16).
inline __mmask16 first_n(std::int64_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : n <= 0 ? static_cast<__mmask16>(0) : static_cast<__mmask16>((1u << n) - 1u);
}

// 32 consecutive values x[0, n) (zero past n) as 16 pair words: word i = bf16(x[2i]) | bf16(x[2i+1]) << 16.
inline __m512i pairs_of_run(const float* x, std::int64_t n) {
  const __m512 lo = _mm512_maskz_loadu_ps(first_n(n), x);
  const __m512 hi = _mm512_maskz_loadu_ps(first_n(n - 16), x + 16);
  return (__m512i)_mm512_cvtne2ps_pbh(hi, lo);
}

// 16 pair words from 16 even-k and 16 odd-k values: word i = bf16(even[i]) | bf16(odd[i]) << 16.
inline __m512i pairs_of(__m512 even, __m512 odd) {
  // cvtne2ps gives the 16 even halves, then the 16 odd ones; interleave them.
  const __m512i idx = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22, 6,
                                       21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  return _mm512_permutexvar_epi16(idx, (__m512i)_mm512_cvtne2ps_pbh(odd, even));
}

}  // namespace tfm::kernels::bf16_pairs
