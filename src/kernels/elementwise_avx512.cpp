// AVX-512 build of the elementwise kernels (body: elementwise_impl.h).
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_ps() through, which -Wall reports as
// uninitialised once inlined here (GCC PR 105593); silence that false positive for this TU.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "kernels/elementwise_impl.h"

namespace tfm::kernels {
void binary_run_avx512(BinaryOp op, const float* a, std::int64_t sa, const float* b, std::int64_t sb, float* y,
                     std::int64_t n) {
  impl::binary_run<simd::Avx512>(op, a, sa, b, sb, y, n);
}
void axpy_run_avx512(float alpha, const float* x, float* y, std::int64_t n) { impl::axpy_run<simd::Avx512>(alpha, x, y, n); }
}  // namespace tfm::kernels
