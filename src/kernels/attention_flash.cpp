// The fused attention kernels: the portable build and the per-ISA dispatch.
#include "kernels/attention_flash_impl.h"
#include "kernels/gemm_bf16.h"
#include "tfm/runtime.h"

namespace tfm::kernels {
namespace flash {

void forward_generic(const AttentionParams& p, HeadsView q, HeadsView k, HeadsView v, float* out, float* lse) {
  if (p.bf16) return forward<simd::Generic, EmulatedBf16Products<simd::Generic>>(p, q, k, v, out, lse);
  forward<simd::Generic, Fp32Products<simd::Generic>>(p, q, k, v, out, lse);
}

void backward_generic(const AttentionParams& p, HeadsView q, HeadsView k, HeadsView v, const float* out,
                      const float* lse, const float* dout, float* dq, float* dk, float* dv, float* dbias) {
  if (p.bf16) return backward<simd::Generic, EmulatedBf16Products<simd::Generic>>(p, q, k, v, out, lse, dout, dq, dk, dv, dbias);
  backward<simd::Generic, Fp32Products<simd::Generic>>(p, q, k, v, out, lse, dout, dq, dk, dv, dbias);
}

// bf16 products with VDPBF16PS where the bf16 GEMM takes its native path (same CPU test, and
// TFM_BF16=emulated switches both); otherwise the emulated products of the active ISA.
bool native_bf16(const AttentionParams& p) {
  return p.bf16 && bf16_path() == Bf16Path::native && active_isa() == Isa::avx512 && cpu_info().avx512_bf16;
}

}  // namespace flash

void attention_flash_forward(const AttentionParams& p, HeadsView q, HeadsView k, HeadsView v, float* out,
                             float* lse) {
  if (flash::native_bf16(p)) return flash::forward_avx512bf16(p, q, k, v, out, lse);
  switch (active_isa()) {
    case Isa::avx512: return flash::forward_avx512(p, q, k, v, out, lse);
    case Isa::avx2: return flash::forward_avx2(p, q, k, v, out, lse);
    case Isa::generic: break;
  }
  flash::forward_generic(p, q, k, v, out, lse);
}

void attention_flash_backward(const AttentionParams& p, HeadsView q, HeadsView k, HeadsView v, const float* out,
                              const float* lse, const float* dout, float* dq, float* dk, float* dv, float* dbias) {
  if (flash::native_bf16(p)) return flash::backward_avx512bf16(p, q, k, v, out, lse, dout, dq, dk, dv, dbias);
  switch (active_isa()) {
    case Isa::avx512: return flash::backward_avx512(p, q, k, v, out, lse, dout, dq, dk, dv, dbias);
    case Isa::avx2: return flash::backward_avx2(p, q, k, v, out, lse, dout, dq, dk, dv, dbias);
    case Isa::generic: break;
  }
  flash::backward_generic(p, q, k, v, out, lse, dout, dq, dk, dv, dbias);
}

}  // namespace tfm::kernels
