// One BLAS candidate's sgemm speed at Transformer shapes, for choosing the GEMM backend.
// Built three times (bench/blas/CMakeLists.txt), once per library, so that no binary links
// two BLASes:  bench_blas_openblas, bench_blas_blis, bench_blas_onednn.
//
// For each shape it prints GFLOP/s (best of --reps runs) for:
//   1t       the library on one thread;
//   own2t    the library with its own threading at 2 threads;
//   split2t  our design: the output cut in 2 column (or row) halves, each half computed by a
//            single-threaded call inside an OpenMP parallel region.
// Usage: bench_blas_<lib> [reps]      (docs/benchmarks.md, "Choosing the BLAS", has the best figures)
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#if defined(CAND_OPENBLAS)
#include <cblas.h>
static const char* kName = "openblas";
static void set_threads(int n) { openblas_set_num_threads(n); }
static void sgemm(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc);
}
#elif defined(CAND_BLIS)
#include <blis.h>
static const char* kName = "blis";
static void set_threads(int n) { bli_thread_set_num_threads(n); }
static void sgemm(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc) {
  float one = 1.0f, zero = 0.0f;
  // Row-major strides: rs = ld, cs = 1.
  bli_sgemm(BLIS_NO_TRANSPOSE, BLIS_NO_TRANSPOSE, M, N, K, &one, const_cast<float*>(A), lda, 1,
            const_cast<float*>(B), ldb, 1, &zero, C, ldc, 1);
}
#elif defined(CAND_ONEDNN)
#include <oneapi/dnnl/dnnl.h>
static const char* kName = "onednn";
// oneDNN (OpenMP build) uses omp_get_max_threads() outside a parallel region and one thread
// inside one.
static void set_threads(int n) { omp_set_num_threads(n); }
static void sgemm(int M, int N, int K, const float* A, int lda, const float* B, int ldb, float* C, int ldc) {
  dnnl_sgemm('N', 'N', M, N, K, 1.0f, A, lda, B, ldb, 0.0f, C, ldc);
}
#else
#error "define CAND_OPENBLAS, CAND_BLIS or CAND_ONEDNN"
#endif

namespace {

template <class Fn>
double best_seconds(int reps, Fn&& fn) {
  fn();  // warm-up: page faults, library initialisation, thread start
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 10;
  struct Shape { int M, N, K; };
  // [B*T, C] x [C, 4C] (MLP up-projection) and [B*T, C] x [C, C] (attention projection).
  std::vector<Shape> shapes;
  for (int C : {256, 512, 768, 1024}) {
    shapes.push_back({1024, 4 * C, C});
    shapes.push_back({1024, C, C});
  }
  std::printf("%-9s %-18s %9s %9s %9s %8s\n", "library", "M x N x K", "1t", "own2t", "split2t", "split/1t");
  for (const Shape& s : shapes) {
    std::vector<float> A(static_cast<size_t>(s.M) * s.K), B(static_cast<size_t>(s.K) * s.N),
        C(static_cast<size_t>(s.M) * s.N);
    for (size_t i = 0; i < A.size(); ++i) A[i] = static_cast<float>((i * 7919) % 1000) * 1e-3f - 0.5f;
    for (size_t i = 0; i < B.size(); ++i) B[i] = static_cast<float>((i * 104729) % 1000) * 1e-3f - 0.5f;
    const double flops = 2.0 * s.M * s.N * s.K;
    set_threads(1);
    const double t1 = best_seconds(reps, [&] { sgemm(s.M, s.N, s.K, A.data(), s.K, B.data(), s.N, C.data(), s.N); });
    set_threads(2);
    const double t2 = best_seconds(reps, [&] { sgemm(s.M, s.N, s.K, A.data(), s.K, B.data(), s.N, C.data(), s.N); });
    set_threads(1);
    const double ts = best_seconds(reps, [&] {
#pragma omp parallel num_threads(2)
      {
        const int t = omp_get_thread_num();
        if (s.N >= s.M) {  // split columns at a multiple of 64
          const int half = (s.N / 2 + 63) / 64 * 64, n0 = t ? half : 0, n1 = t ? s.N : half;
          sgemm(s.M, n1 - n0, s.K, A.data(), s.K, B.data() + n0, s.N, C.data() + n0, s.N);
        } else {
          const int half = s.M / 2, m0 = t ? half : 0, m1 = t ? s.M : half;
          sgemm(m1 - m0, s.N, s.K, A.data() + static_cast<size_t>(m0) * s.K, s.K, B.data(), s.N,
                C.data() + static_cast<size_t>(m0) * s.N, s.N);
        }
      }
    });
    char dims[32];
    std::snprintf(dims, sizeof dims, "%dx%dx%d", s.M, s.N, s.K);
    std::printf("%-9s %-18s %9.1f %9.1f %9.1f %8.2f\n", kName, dims, flops / t1 * 1e-9, flops / t2 * 1e-9,
                flops / ts * 1e-9, t1 / ts);
    std::fflush(stdout);
  }
  return 0;
}
