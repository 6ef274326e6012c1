// The emulated bf16 GEMM kernel built for AVX2 (8 lanes, FMA).
#include "kernels/gemm_bf16_impl.h"

namespace tfm::kernels::gemm_bf16_isa {
const Kernel emulated_avx2 = make_emulated<simd::Vec<simd::Avx2>>();
}
