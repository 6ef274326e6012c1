// The packed GEMM driver that the fp32 GEMM (gemm.h) and the bf16 GEMM (gemm_bf16.h) share:
// one per-ISA Kernel (packing routines and a register-tiled micro-kernel) run over blocks of C.
//
// Both operands are packed into panels (A: mr rows, B: nr columns, K in pairs): B once per
// call (with one block row of A, block by block by the thread that runs it, so that the packed
// panels are still in its cache), A one block row at a time by the thread that runs it. The (M/mr) x (N/nr) grid of
// micro-tiles is cut into blocks of block_a_panels A-panels by 4 B-panels that the threads
// share out. A
// B-panel stays in L1/L2 while the block's A-panels pass over it. Each C element is one
// micro-kernel's full-K chain, the same instructions whatever row and column it sits in, so
// the blocking, the thread count, M and the element's neighbours never change a result.
#pragma once

#include <cstdint>

namespace tfm::kernels::packed {

// One ISA's packing and micro-kernel; run() owns buffers and threads.
//   pack_a: rows [m0, m0 + rows) of op(A) (rows <= mr, the rest zero) into one panel;
//   pack_b: columns [n0, n0 + cols) of op(B) (cols <= nr) into one panel;
//   micro:  the tile's sums over P pairs of the panels (pointers already at the first pair);
//           load_acc: continue the raw sums already in C (a later K block) instead of zero;
//           finish: write alpha * sums + beta * C (+ bias[j] when bias is not null), else
//           the raw sums (an fp32 store and load are exact, so a K-blocked chain rounds
//           exactly like an unbroken one).
struct Kernel {
  int mr = 0, nr = 0;
  int pair_bytes = 0;  // bytes one k-pair of one row/column takes in a panel
  // K is walked in blocks of this many pairs (when beta == 0): a B sub-panel, nr x 2 x
  // block_pairs values, should stay in L1 while the block's A panels pass over it.
  int block_pairs = 256;
  // A panels per block row: the rows that pass over each B block before the next is read.
  // Every B block is read once per block row, from memory when B is large.
  int block_a_panels = 8;
  void (*pack_a)(bool ta, const float* A, std::int64_t lda, std::int64_t m0, std::int64_t rows, std::int64_t K,
                 void* panel) = nullptr;
  void (*pack_b)(bool tb, const float* B, std::int64_t ldb, std::int64_t n0, std::int64_t cols, std::int64_t K,
                 void* panel) = nullptr;
  void (*micro)(std::int64_t P, const void* a_panel, const void* b_panel, float alpha, float beta, float* C,
                std::int64_t ldc, int rows, int cols, bool load_acc, bool finish, const float* bias) = nullptr;
};

// C = alpha * op(A) op(B) + beta * C (+ bias per column when bias is not null; then alpha is 1
// and beta 0). M, N, K > 0. Runs on the engine's threads (serially inside a parallel region).
void run(const Kernel& k, bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha,
         const float* A, std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc,
         const float* bias);

}  // namespace tfm::kernels::packed
