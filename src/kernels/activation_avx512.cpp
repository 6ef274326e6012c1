// AVX-512 build of the activation kernels (body: activation_impl.h).
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_ps() through, which -Wall reports as
// uninitialised once inlined here (GCC PR 105593); silence that false positive for this TU.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "kernels/activation_impl.h"

namespace tfm::kernels {
void activation_forward_avx512(Activation f, const float* x, float* y, std::int64_t n) {
  impl::activation_forward<simd::Avx512>(f, x, y, n);
}
void activation_backward_avx512(Activation f, const float* x, const float* dy, float* dx, std::int64_t n) {
  impl::activation_backward<simd::Avx512>(f, x, dy, dx, n);
}
}  // namespace tfm::kernels
