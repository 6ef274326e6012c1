// Row-independent few-row GEMM compiled for AVX2.
#include "kernels/gemm_rows_impl.h"

namespace tfm::kernels::gemm_rows_isa {
const Fn avx2 = &body<simd::Vec<simd::Avx2>>;
}
