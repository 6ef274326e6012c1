// The fp32 GEMM tiles built for AVX2 (6 x 16: 8 lanes, FMA).
#include "kernels/gemm_tiles_impl.h"

namespace tfm::kernels::gemm_tiles {
const packed::Kernel avx2 = make_kernel<simd::Vec<simd::Avx2>, 6, 128>();
}
