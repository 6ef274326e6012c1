// The fused attention kernels: the portable build and the per-ISA dispatch.
#include "kernels/attention_flash_impl.h"
#include "tfm/runtime.h"

namespace tfm::kernels {
namespace flash {

void forward_generic(const AttentionParams& p, HeadsView q, HeadsView k, HeadsView v, float* out, float* lse) {
  forward<simd::Generic>(p, q, k, v, out, lse);
}

void backward_generic(const AttentionParams& p, HeadsView q, HeadsView k, HeadsView v, const float* out,
                      const float* lse, const float* dout, float* dq, float* dk, float* dv, float* dbias) {
  backward<simd::Generic>(p, q, k, v, out, lse, dout, dq, dk, dv, dbias);
}

}  // namespace flash

void attention_flash_forward(const AttentionParams& p, HeadsView q, HeadsView k, HeadsView v, float* out,
                             float* lse) {
  switch (active_isa()) {
    case Isa::avx512: return flash::forward_avx512(p, q, k, v, out, lse);
    case Isa::avx2: return flash::forward_avx2(p, q, k, v, out, lse);
    case Isa::generic: break;
  }
  flash::forward_generic(p, q, k, v, out, lse);
}

void attention_flash_backward(const AttentionParams& p, HeadsView q, HeadsView k, HeadsView v, const float* out,
                              const float* lse, const float* dout, float* dq, float* dk, float* dv, float* dbias) {
  switch (active_isa()) {
    case Isa::avx512: return flash::backward_avx512(p, q, k, v, out, lse, dout, dq, dk, dv, dbias);
    case Isa::avx2: return flash::backward_avx2(p, q, k, v, out, lse, dout, dq, dk, dv, dbias);
    case Isa::generic: break;
  }
  flash::backward_generic(p, q, k, v, out, lse, dout, dq, dk, dv, dbias);
}

}  // namespace tfm::kernels
