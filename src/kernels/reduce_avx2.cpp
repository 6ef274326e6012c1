// AVX2 build of the reduction kernels (body: reduce_impl.h).
#include "kernels/reduce.h"
#include "kernels/reduce_impl.h"

namespace tfm::kernels {
float row_sum_avx2(const float* x, std::int64_t n) { return impl::row_sum<simd::Avx2>(x, n); }
float row_max_avx2(const float* x, std::int64_t n) { return impl::row_max<simd::Avx2>(x, n); }
void col_accumulate_avx2(const float* x, std::int64_t ld, std::int64_t rows, float* y, std::int64_t cols) {
  impl::col_accumulate<simd::Avx2>(x, ld, rows, y, cols);
}
}  // namespace tfm::kernels
