// The fused attention kernels built for AVX2 + FMA (8 lanes).
#include "kernels/attention_flash_impl.h"

namespace tfm::kernels::flash {

void forward_avx2(const AttentionParams& p, HeadsView q, HeadsView k, HeadsView v, float* out, float* lse) {
  if (p.bf16) return forward<simd::Avx2, EmulatedBf16Products<simd::Avx2>>(p, q, k, v, out, lse);
  forward<simd::Avx2, Fp32Products<simd::Avx2>>(p, q, k, v, out, lse);
}

void backward_avx2(const AttentionParams& p, HeadsView q, HeadsView k, HeadsView v, const float* out, const float* lse,
                   const float* dout, float* dq, float* dk, float* dv, float* dbias) {
  if (p.bf16) return backward<simd::Avx2, EmulatedBf16Products<simd::Avx2>>(p, q, k, v, out, lse, dout, dq, dk, dv, dbias);
  backward<simd::Avx2, Fp32Products<simd::Avx2>>(p, q, k, v, out, lse, dout, dq, dk, dv, dbias);
}

}  // namespace tfm::kernels::flash
