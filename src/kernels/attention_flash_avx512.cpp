// The fused attention kernels built for AVX-512 (16 lanes).
//
// GCC 12.2 warns "'__Y' is used uninitialized" inside its own avx512fintrin.h when the
// _mm512_undefined_* placeholders are inlined (GCC bug 105593, fixed in 12.3); silenced for
// this file only, since the intrinsics themselves are correct.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "kernels/attention_flash_impl.h"

namespace tfm::kernels::flash {

void forward_avx512(const AttentionParams& p, HeadsView q, HeadsView k, HeadsView v, float* out, float* lse) {
  if (p.bf16) return forward<simd::Avx512, EmulatedBf16Products<simd::Avx512>>(p, q, k, v, out, lse);
  forward<simd::Avx512, Fp32Products<simd::Avx512>>(p, q, k, v, out, lse);
}

void backward_avx512(const AttentionParams& p, HeadsView q, HeadsView k, HeadsView v, const float* out,
                     const float* lse, const float* dout, float* dq, float* dk, float* dv, float* dbias) {
  if (p.bf16) return backward<simd::Avx512, EmulatedBf16Products<simd::Avx512>>(p, q, k, v, out, lse, dout, dq, dk, dv, dbias);
  backward<simd::Avx512, Fp32Products<simd::Avx512>>(p, q, k, v, out, lse, dout, dq, dk, dv, dbias);
}

}  // namespace tfm::kernels::flash
