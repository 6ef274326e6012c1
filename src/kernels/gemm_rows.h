// Row-independent GEMM for few rows (decoding): C (M, N) = alpha * A (M, K) op(B) + beta * C,
// A not transposed; op(B) = Bᵀ with B (N, K) when trans_b (nn.Linear's weight), else B (K, N).
//
// Why hand-written: each element C[m, n] is computed by the same instructions in the same
// order whatever M is and wherever row m sits — the BLAS does not promise that (oneDNN's M = 1
// path is a GEMV whose sums round differently from its M > 1 kernel; measured). Batched
// decoding relies on it: a sequence's logits are bit-identical whether it is decoded alone
// or beside seven others. With few rows the work is bound by streaming B from memory, which
// this loop does at the same speed as the BLAS (bench: `tfm bench gemm`).
#pragma once

#include <cstdint>

namespace tfm::kernels {

// Rows up to which gemm() takes this path (and batched decoding chunks its rows).
constexpr std::int64_t kRowInvariantMaxRows = 16;

void gemm_rows(bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* A,
               std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc);

namespace gemm_rows_isa {
// One ISA's body over output columns [n0, n1): every row of A.
using Fn = void (*)(bool trans_b, std::int64_t M, std::int64_t n0, std::int64_t n1, std::int64_t K, float alpha,
                    const float* A, std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C,
                    std::int64_t ldc);
extern const Fn generic, avx2, avx512;
}  // namespace gemm_rows_isa

}  // namespace tfm::kernels
