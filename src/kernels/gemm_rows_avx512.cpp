// Row-independent few-row GEMM compiled for AVX512.
// GCC 12 false positive inside avx512fintrin.h (see norm_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "kernels/gemm_rows_impl.h"

namespace tfm::kernels::gemm_rows_isa {
const Fn avx512 = &body<simd::Vec<simd::Avx512>>;
}
