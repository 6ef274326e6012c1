// Optimizer kernels: dispatch, the baseline build and the naive twin.
#include "kernels/optimizer.h"

#include <cmath>

#include "kernels/dispatch.h"
#include "kernels/optimizer_impl.h"

namespace tfm::kernels {

void adamw_update_generic(float* w, const float* g, float* m, float* v, std::int64_t n, const AdamWScalars& s) {
  impl::adamw_update<simd::Generic>(w, g, m, v, n, s);
}

void adamw_update(float* w, const float* g, float* m, float* v, std::int64_t n, const AdamWScalars& s) {
  pick_isa(&adamw_update_generic, &adamw_update_avx2, &adamw_update_avx512)(w, g, m, v, n, s);
}

void adamw_update_naive(float* w, const float* g, float* m, float* v, std::int64_t n, const AdamWScalars& s) {
  for (std::int64_t i = 0; i < n; ++i) {
    if (s.apply_decay) w[i] *= s.decay;                         // param.mul_(1 - lr*wd)
    m[i] = m[i] * s.b1 + g[i] * s.a1;                           // exp_avg.mul_(b1).add_(g, 1-b1)
    v[i] = v[i] * s.b2 + (g[i] * g[i]) * s.a2;                  // exp_avg_sq.mul_(b2).addcmul_(g, g, 1-b2)
    const float denom = std::sqrt(v[i]) / s.bc2_sqrt + s.eps;   // (v.sqrt() / bc2_sqrt).add_(eps)
    w[i] = w[i] + (-s.step_size) * (m[i] / denom);              // param.addcdiv_(m, denom, -step_size)
  }
}

}  // namespace tfm::kernels
