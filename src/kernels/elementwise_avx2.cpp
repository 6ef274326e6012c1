// AVX2 build of the elementwise kernels (body: elementwise_impl.h).
#include "kernels/elementwise_impl.h"

namespace tfm::kernels {
void binary_run_avx2(BinaryOp op, const float* a, std::int64_t sa, const float* b, std::int64_t sb, float* y,
                     std::int64_t n) {
  impl::binary_run<simd::Avx2>(op, a, sa, b, sb, y, n);
}
void axpy_run_avx2(float alpha, const float* x, float* y, std::int64_t n) { impl::axpy_run<simd::Avx2>(alpha, x, y, n); }
}  // namespace tfm::kernels
