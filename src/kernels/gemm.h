// fp32 GEMM. Row-major: C[M,N] = alpha * op(A) op(B) + beta * C, op(X) = X or Xᵀ.
// A is (M,K) (or (K,M) when trans_a), B is (K,N) (or (N,K) when trans_b); ld* are row
// strides in elements. Threads: split over the engine's thread count (see gemm.cpp for why
// we partition ourselves instead of letting the BLAS thread).
#pragma once

#include <cstdint>

namespace tfm::kernels {

void gemm(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, float alpha,
          const float* A, std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C,
          std::int64_t ldc);

// Batched: batch independent GEMMs; A, B, C advance by stride_a/b/c elements per batch.
void gemm_batched(bool trans_a, bool trans_b, std::int64_t batch, std::int64_t M, std::int64_t N,
                  std::int64_t K, float alpha, const float* A, std::int64_t lda, std::int64_t stride_a,
                  const float* B, std::int64_t ldb, std::int64_t stride_b, float beta, float* C,
                  std::int64_t ldc, std::int64_t stride_c);

// Naive twin: triple loop in double accumulation — the reference for tests.
void gemm_naive(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, float alpha,
                const float* A, std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C,
                std::int64_t ldc);

// The BLAS called directly with its own threading (for benchmarks: "the BLAS alone").
void gemm_blas_direct(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K,
                      float alpha, const float* A, std::int64_t lda, const float* B, std::int64_t ldb,
                      float beta, float* C, std::int64_t ldc, int blas_threads);
const char* gemm_backend_name();

}  // namespace tfm::kernels
