// AVX-512 build of the reduction kernels (body: reduce_impl.h).
// GCC 12's AVX-512 intrinsics pass _mm512_undefined_ps() through, which -Wall reports as
// uninitialised once inlined here (GCC PR 105593); silence that false positive for this TU.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "kernels/reduce.h"
#include "kernels/reduce_impl.h"

namespace tfm::kernels {
float row_sum_avx512(const float* x, std::int64_t n) { return impl::row_sum<simd::Avx512>(x, n); }
float row_max_avx512(const float* x, std::int64_t n) { return impl::row_max<simd::Avx512>(x, n); }
void col_accumulate_avx512(const float* x, std::int64_t ld, std::int64_t rows, float* y, std::int64_t cols) {
  impl::col_accumulate<simd::Avx512>(x, ld, rows, y, cols);
}
}  // namespace tfm::kernels
