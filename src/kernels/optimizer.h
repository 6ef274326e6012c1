// Element-wise optimizer updates (the inner loops of tfm::Optimizer), vectorised per ISA.
//
// Each element is updated by the same sequence of correctly rounded float operations
// (mul, add, sqrt, div; no fused multiply-add) in the vector and the naive build, so both
// give bit-identical parameters, and so does any split of the range over threads.
#pragma once

#include <cstdint>

namespace tfm::kernels {

// torch.optim.AdamW's single-tensor update, per element i:
//   w *= decay (when apply_decay);  m = m*b1 + g*a1;  v = v*b2 + (g*g)*a2;
//   w = w + (-step_size) * (m / (sqrt(v) / bc2_sqrt + eps))
struct AdamWScalars {
  float decay = 1.0f, b1 = 0.9f, a1 = 0.1f, b2 = 0.999f, a2 = 0.001f;
  float step_size = 0.0f, bc2_sqrt = 1.0f, eps = 1e-8f;
  bool apply_decay = false;
};

void adamw_update(float* w, const float* g, float* m, float* v, std::int64_t n, const AdamWScalars& s);
void adamw_update_naive(float* w, const float* g, float* m, float* v, std::int64_t n, const AdamWScalars& s);

void adamw_update_generic(float* w, const float* g, float* m, float* v, std::int64_t n, const AdamWScalars& s);
void adamw_update_avx2(float* w, const float* g, float* m, float* v, std::int64_t n, const AdamWScalars& s);
void adamw_update_avx512(float* w, const float* g, float* m, float* v, std::int64_t n, const AdamWScalars& s);

}  // namespace tfm::kernels
