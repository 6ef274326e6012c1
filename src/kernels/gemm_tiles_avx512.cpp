// The fp32 GEMM tiles built for AVX-512 (12 x 32: 16 lanes).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "kernels/gemm_tiles_impl.h"

namespace tfm::kernels::gemm_tiles {
const packed::Kernel avx512 = make_kernel<simd::Vec<simd::Avx512>, 12, 64>();
}
