// The one seam to the BLAS library this build links (chosen in the top-level CMakeLists.txt
// from TFM_BLAS; docs/benchmarks.md has the measurement behind the default). Private to
// src/kernels: everything else calls gemm.h.
#pragma once

#include <cstdint>

namespace tfm::kernels::blas {

// Row-major sgemm on the calling thread only (the library's own threading is held at 1).
void sgemm_1t(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, float alpha,
              const float* A, std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C,
              std::int64_t ldc);
// The same with the library's own threading at `threads` (benchmarks only; not re-entrant).
void sgemm_threads(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, float alpha,
                   const float* A, std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C,
                   std::int64_t ldc, int threads);
const char* name();
// With oneDNN: caps its instruction set at the one TFM_ISA names in the environment (avx2 ->
// AVX2, generic -> SSE4.1), so that a run forced to a lower ISA exercises oneDNN's kernels for
// such a CPU too. Called before oneDNN's first use (its cap is read once per process; later
// set_active_isa() calls do not move it). A no-op otherwise.
void follow_isa_override();

}  // namespace tfm::kernels::blas
