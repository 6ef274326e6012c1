// The BLAS seam: OpenBLAS or oneDNN, whichever this build links (TFM_BLAS_OPENBLAS /
// TFM_BLAS_ONEDNN, set by CMake). Both are called single-threaded by gemm.cpp, which does the
// threading itself (see there for why).
#include "kernels/gemm_blas.h"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>

#include "tfm/runtime.h"

#if defined(TFM_BLAS_OPENBLAS)
#include <cblas.h>
#elif defined(TFM_BLAS_ONEDNN)
#include <oneapi/dnnl/dnnl.h>
#else
#error "build with TFM_BLAS_OPENBLAS or TFM_BLAS_ONEDNN (top-level CMakeLists.txt)"
#endif

namespace tfm::kernels::blas {
namespace {

// BLAS interfaces reject ld < max(1, row length) even for a single stored row, whose stride is
// never used; callers of gemm.h may pass such an ld (e.g. a (1, K) view with stride 0).
std::int64_t fix_ld(std::int64_t ld, std::int64_t row_len) { return std::max<std::int64_t>({ld, row_len, 1}); }

#if defined(TFM_BLAS_OPENBLAS)
std::once_flag g_init;
void hold_one_thread() {
  std::call_once(g_init, [] { openblas_set_num_threads(1); });
}
#endif

#if defined(TFM_BLAS_ONEDNN)
std::once_flag g_isa_cap;
#endif

void call(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* A,
          std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc) {
  // Stored shapes: A is (M,K) or (K,M) when ta, B is (K,N) or (N,K) when tb, C is (M,N).
  if ((ta ? K : M) == 1) lda = fix_ld(lda, ta ? M : K);
  if ((tb ? N : K) == 1) ldb = fix_ld(ldb, tb ? K : N);
  if (M == 1) ldc = fix_ld(ldc, N);
#if defined(TFM_BLAS_OPENBLAS)
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans,
              static_cast<blasint>(M), static_cast<blasint>(N), static_cast<blasint>(K), alpha, A,
              static_cast<blasint>(lda), B, static_cast<blasint>(ldb), beta, C, static_cast<blasint>(ldc));
#else
  follow_isa_override();
  dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#endif
}

}  // namespace

void sgemm_1t(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* A,
              std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc) {
#if defined(TFM_BLAS_OPENBLAS)
  hold_one_thread();
  call(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
#else
  // oneDNN's OpenMP build runs on one thread inside an active parallel region and on
  // omp_get_max_threads() outside one (a one-thread team is NOT active, so it would still
  // spawn a nested team). Outside a region we lower this thread's nthreads ICV for the call.
  if (omp_in_parallel()) {
    call(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  } else {
    const int previous = omp_get_max_threads();
    omp_set_num_threads(1);
    call(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    omp_set_num_threads(previous);
  }
#endif
}

void sgemm_threads(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* A,
                   std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc,
                   int threads) {
#if defined(TFM_BLAS_OPENBLAS)
  hold_one_thread();
  openblas_set_num_threads(threads);
  call(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  openblas_set_num_threads(1);
#else
  const int previous = omp_get_max_threads();
  omp_set_num_threads(threads);
  call(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  omp_set_num_threads(previous);
#endif
}

void follow_isa_override() {
#if defined(TFM_BLAS_ONEDNN)
  std::call_once(g_isa_cap, [] {
    const char* env = std::getenv("TFM_ISA");
    if (env == nullptr || *env == '\0') return;
    const Isa isa = isa_from_name(env);
    if (isa == Isa::avx2) dnnl_set_max_cpu_isa(dnnl_cpu_isa_avx2);
    if (isa == Isa::generic) dnnl_set_max_cpu_isa(dnnl_cpu_isa_sse41);
  });
#endif
}

const char* name() {
#if defined(TFM_BLAS_OPENBLAS)
  return "openblas";
#else
  return "onednn";
#endif
}

}  // namespace tfm::kernels::blas
