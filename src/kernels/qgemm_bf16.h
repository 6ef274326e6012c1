// bf16 weights at inference (qgemm's bf16 case): the activations are rounded to bf16 once per
// call (round-to-nearest-even, NaN quieted, denormals to zero: gemm_bf16.h's rule), then every
// output is Σ_k bf16(x_k) · w_k summed in f32, as llama.cpp does for bf16 weights.
//
// - AVX-512 with AVX512_BF16 (qgemm_bf16_avx512.cpp): the rounded activations as bf16 pairs and
//   register tiles of up to 4 activation rows x 2 weight rows, one VDPBF16PS per 32 products;
//   each output has two vector accumulators (alternate 32-element chunks) and one horizontal
//   sum, the same sequence whatever the tile, so a row's result does not depend on M.
// - Elsewhere (AVX-512 without BF16, AVX2, generic): the emulation. The rounded activations as
//   f32 values go through the ISA's f32 kernels for bf16 weights (qgemm_avx512.cpp,
//   qgemm_avx2.cpp; the scalar twin rounds them itself): each product of two bf16 values is
//   exact in f32, so these differ from the native kernel by the order of the f32 sums only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/qgemm_act.h"

namespace tfm::kernels::qgemm_detail {

// Activation rows rounded to bf16 (bits), each zero-padded to `stride` = K rounded up to 32.
struct Bf16Acts {
  std::int64_t rows = 0, K = 0, stride = 0;
  std::vector<std::uint16_t> v;
  const std::uint16_t* row(std::int64_t m) const { return v.data() + m * stride; }
};
using Bf16PrepareFn = void (*)(std::int64_t M, std::int64_t K, const float* x, std::int64_t ldx, Bf16Acts& out);
using Bf16RowsFn = void (*)(std::int64_t M, std::int64_t n0, std::int64_t n1, std::int64_t K, const Bf16Acts& acts,
                            const void* w, std::size_t row_bytes, float* y, std::int64_t ldy);
// The VDPBF16PS build (qgemm_bf16_avx512.cpp); run only where cpuid reports AVX512_BF16.
extern const Bf16PrepareFn bf16_prepare_native;
extern const Bf16RowsFn bf16_rows_native;

// True when qgemm's bf16 case runs the VDPBF16PS kernel: TFM_ISA is avx512, the CPU has
// AVX512_BF16 and the tests have not switched it off.
bool bf16_native_active();
void set_bf16_native_enabled(bool enabled);  // tests: the emulation on a CPU that has BF16

// y = bf16(x) · Wᵀ for bf16 weights, threaded over N. `emulated` is the ISA's kernel for
// bf16 weights on f32 activations (qgemm.cpp's pick), used where the native one is not.
void qgemm_bf16(RowsFn emulated, std::int64_t M, std::int64_t N, std::int64_t K, const float* x, std::int64_t ldx,
                const void* w, float* y, std::int64_t ldy);

}  // namespace tfm::kernels::qgemm_detail
