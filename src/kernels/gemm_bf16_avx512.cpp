// The emulated bf16 GEMM kernel built for AVX-512 (16 lanes) — the path for AVX-512 CPUs
// without AVX512_BF16, and the twin the native kernel is tested against.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "kernels/gemm_bf16_impl.h"

namespace tfm::kernels::gemm_bf16_isa {
const Kernel emulated_avx512 = make_emulated<simd::Vec<simd::Avx512>>();
}
