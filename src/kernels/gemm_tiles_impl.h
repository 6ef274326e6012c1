// Packing and micro-kernel of the fp32 GEMM (gemm.h), written once over simd::Vec<Isa> and
// compiled per ISA (gemm.cpp, gemm_tiles_avx2.cpp, gemm_tiles_avx512.cpp); gemm_packed.h runs
// them over blocks of C. Included only by those files; everything here is a template on V or
// has internal linkage.
//
// The order of the sums is the definition of the product: C[i, j] is one chain
//   acc = +0;  acc = fma(a[i, k], b[k, j], acc)  for k = 0, 1, ..., K - 1;  C = alpha acc (+ beta C)
// whatever the tile, the row or column the element sits in, M, N and the thread count. That is
// what makes a sequence's activations bit-identical whatever batch it is trained or run in
// (oneDNN's sgemm does not promise it, and its AVX2 kernels break it: rows in M-tails round
// differently). It is also the order of gemm_rows's B (K, N) path, so the two agree bit for bit.
//
// Panels hold the fp32 values k by k, in the order the chain consumes them (the driver counts
// them in pairs of k, gemm_packed.h, so an odd K gets one pad k):
//   A panel, per k: the MR rows' a[r, k]            (MR floats)
//   B panel, per k: the NR columns' b[k, j]         (NR floats)
// An odd K is padded with a[K] = -0 and b[K] = +0: the product -0 added to any acc gives acc
// back exactly (+0 + -0 = +0, -0 + -0 = -0), so the pad step changes no bit.
#pragma once

#include <cstdint>

#include "kernels/gemm_packed.h"
#include "kernels/gemm_tile_io.h"
#include "kernels/simd/transpose.h"
#include "kernels/simd/vec.h"

namespace tfm::kernels::gemm_tiles {
namespace {

// op(X)[i, k] of a stored matrix: X is (I, K) or, transposed, (K, I).
inline float at(const float* X, std::int64_t ld, bool trans, std::int64_t i, std::int64_t k) {
  return trans ? X[k * ld + i] : X[i * ld + k];
}

template <int MR>
void pack_a(bool ta, const float* A, std::int64_t lda, std::int64_t m0, std::int64_t rows, std::int64_t K,
            void* panel) {
  float* out = static_cast<float*>(panel);
  const std::int64_t Kp = (K + 1) / 2 * 2;
  for (std::int64_t k = 0; k < Kp; ++k)
    for (int r = 0; r < MR; ++r) out[k * MR + r] = r >= rows ? 0.0f : k < K ? at(A, lda, ta, m0 + r, k) : -0.0f;
}

// op(B)[k, j] is B[k, j] (B stored (K, N)) or B[j, k] (tb, B stored (N, K)).
template <class Isa, int NR>
void pack_b(bool tb, const float* B, std::int64_t ldb, std::int64_t n0, std::int64_t cols, std::int64_t K,
            void* panel) {
  float* out = static_cast<float*>(panel);
  const std::int64_t P = (K + 1) / 2;
  if (tb) {
    // The panel is op(B)'s columns k by k (out[k * NR + j]): NR rows of B transposed, in
    // square tiles in registers where the ISA has them (simd/transpose.h). Element by element
    // it cost more than the products for a short batch against a large weight (a 34-row
    // BERT-base layer: the packing took 1.5x the micro-kernels' time).
    std::int64_t k0 = 0;
    using Tile = simd::TileTranspose<Isa>;
    if constexpr (Tile::available) {
      constexpr int S = Tile::size;
      static_assert(NR % S == 0);
      if (cols == NR) {
        const float* rows[NR];
        for (int j = 0; j < NR; ++j) rows[j] = B + (n0 + j) * ldb;
        for (; k0 + S <= K; k0 += S)
          for (int c0 = 0; c0 < NR; c0 += S) Tile::run(rows + c0, k0, out + k0 * NR + c0, NR);
      }
    }
    for (std::int64_t k = k0; k < 2 * P; ++k)
      for (int j = 0; j < NR; ++j) out[k * NR + j] = j < cols && k < K ? B[(n0 + j) * ldb + k] : 0.0f;
    return;
  }
  // B stored (K, N): the panel's rows are runs of B's rows, copied (zeros past N and past K).
  for (std::int64_t k = 0; k < 2 * P; ++k) {
    float* row = out + k * NR;
    const float* src = k < K ? B + k * ldb + n0 : nullptr;  // (the pad k: none)
    if (src != nullptr && cols == NR) {
      for (int j = 0; j < NR; ++j) row[j] = src[j];
      continue;
    }
    for (int j = 0; j < NR; ++j) row[j] = src != nullptr && j < cols ? src[j] : 0.0f;
  }
}

// The K chain for an MR x NR tile (NR = 2 vectors), then alpha/beta (and the bias) on the way
// out. Only two B vectors are live (AVX2: 12 accumulators + 2 + a broadcast fit the 16 ymm
// registers; AVX-512: 24 + 3 of 32 zmm).
template <class V, int MR>
void micro(std::int64_t P, const void* a_panel, const void* b_panel, float alpha, float beta, float* C,
           std::int64_t ldc, int rows, int cols, bool load_acc, bool finish, const float* bias) {
  using T = typename V::type;
  constexpr int W = V::width, NR = 2 * W;
  const float* a = static_cast<const float*>(a_panel);
  const float* b = static_cast<const float*>(b_panel);
  T acc[MR][2];
  tile_io::load<V, MR>(acc, C, ldc, rows, cols, load_acc);
  // One k per iteration (not unrolled: two B vectors live, no register copies).
  for (std::int64_t k = 0; k < 2 * P; ++k) {
    const T b0 = V::load(b + k * NR), b1 = V::load(b + k * NR + W);
    const float* ak = a + k * MR;
    for (int r = 0; r < MR; ++r) {
      const T x = V::set1(ak[r]);
      acc[r][0] = V::fma(x, b0, acc[r][0]);
      acc[r][1] = V::fma(x, b1, acc[r][1]);
    }
  }
  tile_io::store<V, MR>(acc, C, ldc, rows, cols, finish, alpha, beta, bias);
}

// MR rows per tile: 2 * MR accumulators plus two B vectors and a broadcast must fit the
// register file (AVX-512: 24 + 3 of 32 zmm; AVX2: 12 + 3 of 16 ymm). BLOCK_PAIRS: K blocks whose
// B sub-panel (2 x BLOCK_PAIRS x NR floats: 16 KiB for 12 x 32 at 64, 6 x 16 at 128) stays in L1
// while the A panels stream past it (at 256 pairs, 64 KiB, the B loads missed L1 and the kernel ran
// at ~40% of the FMA peak).
// Rows of A per block: B blocks are read from memory once per this many rows of A (a wide B
// does not fit the caches), and the block's A slice of one K block (288 x 128 floats, 144 KiB)
// stays in L2 while the B panels pass.
constexpr int kBlockRows = 288;

template <class V, int MR, int BLOCK_PAIRS>
constexpr packed::Kernel make_kernel() {
  packed::Kernel k;
  k.mr = MR;
  k.nr = 2 * V::width;
  k.pair_bytes = 2 * static_cast<int>(sizeof(float));
  k.block_pairs = BLOCK_PAIRS;
  k.block_a_panels = kBlockRows / MR;
  k.pack_a = &pack_a<MR>;
  k.pack_b = &pack_b<typename V::isa, 2 * V::width>;
  k.micro = &micro<V, MR>;
  return k;
}

}  // namespace

extern const packed::Kernel generic, avx2, avx512;

}  // namespace tfm::kernels::gemm_tiles
