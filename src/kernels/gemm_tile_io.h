// The two ends of a register tile that the fp32 and emulated-bf16 micro-kernels share
// (gemm_tiles_impl.h, gemm_bf16_impl.h): MR rows x 2 vectors of accumulators, read from C to
// continue a K-blocked chain, and written back as raw sums or finished with alpha, beta and a
// bias. Templates on V in an anonymous namespace: each ISA's unit keeps its own copies.
#pragma once

#include <cstdint>

#include "kernels/simd/vec.h"

namespace tfm::kernels::tile_io {
namespace {

// Row r's two vectors of C (cols of them valid): whole vectors, or masked at the edge.
template <class V>
typename V::type load_part(const float* c, int cols, int v) {
  constexpr int W = V::width;
  const int n = cols - v * W;
  return n >= W ? V::load(c + v * W) : n > 0 ? V::load_partial(c + v * W, n) : V::zero();
}
template <class V>
void store_part(float* c, typename V::type x, int cols, int v) {
  constexpr int W = V::width;
  const int n = cols - v * W;
  if (n >= W) V::store(c + v * W, x);
  else if (n > 0) V::store_partial(c + v * W, x, n);
}

// acc = the raw sums in C's first `rows` x `cols` (when load_acc), else zero.
template <class V, int MR>
void load(typename V::type (&acc)[MR][2], const float* C, std::int64_t ldc, int rows, int cols, bool load_acc) {
  for (int r = 0; r < MR; ++r) {
    const bool here = load_acc && r < rows;
    acc[r][0] = here ? load_part<V>(C + r * ldc, cols, 0) : V::zero();
    acc[r][1] = here ? load_part<V>(C + r * ldc, cols, 1) : V::zero();
  }
}

// C = the raw sums (a later K block continues them: an fp32 store and load are exact), or, when
// finish, alpha * sums + beta * C (+ bias[j] when bias is not null): per element the products
// rounded, then the sums, in that order (these units compile with -ffp-contract=off).
template <class V, int MR>
void store(typename V::type (&acc)[MR][2], float* C, std::int64_t ldc, int rows, int cols, bool finish, float alpha,
           float beta, const float* bias) {
  using T = typename V::type;
  const T va = V::set1(alpha), vb = V::set1(beta);
  for (int r = 0; r < rows; ++r) {
    float* c = C + r * ldc;
    for (int v = 0; v < 2; ++v) {
      T x = acc[r][v];
      if (finish) {
        x = V::mul(va, x);
        if (beta != 0.0f) x = V::add(x, V::mul(vb, load_part<V>(c, cols, v)));
        if (bias != nullptr) x = V::add(x, load_part<V>(bias, cols, v));  // none: no "+ 0" (-0 stays -0)
      }
      store_part<V>(c, x, cols, v);
    }
  }
}

}  // namespace
}  // namespace tfm::kernels::tile_io
