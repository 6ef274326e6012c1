// AVX-512 build of the optimizer kernels (body: optimizer_impl.h).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
// No fused multiply-add: GCC contracts a*b+c in C++ by default (-ffp-contract=fast), which
// would round differently from the baseline build and from PyTorch's separate operations.
#pragma GCC optimize("fp-contract=off")
#include "kernels/optimizer_impl.h"

namespace tfm::kernels {
void adamw_update_avx512(float* w, const float* g, float* m, float* v, std::int64_t n, const AdamWScalars& s) {
  impl::adamw_update<simd::Avx512>(w, g, m, v, n, s);
}
}  // namespace tfm::kernels
