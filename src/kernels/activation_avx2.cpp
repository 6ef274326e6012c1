// AVX2 build of the activation kernels (body: activation_impl.h).
#include "kernels/activation_impl.h"

namespace tfm::kernels {
void activation_forward_avx2(Activation f, const float* x, float* y, std::int64_t n) {
  impl::activation_forward<simd::Avx2>(f, x, y, n);
}
void activation_backward_avx2(Activation f, const float* x, const float* dy, float* dx, std::int64_t n) {
  impl::activation_backward<simd::Avx2>(f, x, dy, dx, n);
}
}  // namespace tfm::kernels
