// Few-row GEMM: ISA dispatch and threading over columns (each column block is one task, so
// the result does not depend on the thread count either).
#include "kernels/gemm_rows.h"

#include "kernels/dispatch.h"
#include "kernels/gemm_rows_impl.h"
#include "kernels/parallel.h"

namespace tfm::kernels {
namespace gemm_rows_isa {
const Fn generic = &body<simd::Vec<simd::Generic>>;
}

void gemm_rows(bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* A,
               std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  const gemm_rows_isa::Fn fn = pick_isa(gemm_rows_isa::generic, gemm_rows_isa::avx2, gemm_rows_isa::avx512);
  // Blocks of 64 columns: 64 rows of B (or a 64-wide strip) per task.
  constexpr std::int64_t kCols = 64;
  const std::int64_t blocks = (N + kCols - 1) / kCols;
  // Tasks of >= 2^18 elements of B (1 MiB), whatever M: with M <= 16 rows the time goes to
  // reading B, and a task must outlast waking a second thread (tens of microseconds with
  // passive waiting). The grain once counted one block as M * K multiply-adds, forgetting its
  // 64 columns, so a 768 x 3072 decode GEMV stayed on one thread (the issue's "no faster on 2
  // threads"); then as M * 64 * K, which split a small model's (K = 128) batched-decode
  // products into tasks of a few microseconds each: its 8-row decode ran at less than half its
  // 1-thread speed on 2 threads. Per-column results are unchanged by the grain.
  const std::int64_t grain = std::max<std::int64_t>(1, (std::int64_t{1} << 18) / std::max<std::int64_t>(1, kCols * K));
  parallel_for(blocks, grain, [&](std::int64_t b0, std::int64_t b1) {
    fn(trans_b, M, b0 * kCols, std::min(N, b1 * kCols), K, alpha, A, lda, B, ldb, beta, C, ldc);
  });
}

}  // namespace tfm::kernels
