// fp32 GEMM: our packed tiles (gemm_tiles_impl.h) over the engine's threads, or, when asked
// (TFM_GEMM=blas, for benchmarks), the BLAS called single-threaded on pieces of C.
//
// Why our own tiles by default: the product's sums must not depend on where a row sits or how
// many rows there are — a sequence's activations, losses and gradients are then bit-identical
// whatever batch it is trained or run in, on every ISA and thread count. oneDNN's sgemm does not
// promise that and breaks it on AVX2 (rows in its M-tail kernels round differently: measured,
// tests/unit/kernels/test_gemm.cpp). Each element of C is one chain of FMAs over k in order
// (gemm_tiles_impl.h), computed by one micro-kernel call whatever the blocking.
//
// The BLAS path partitions C itself: on this 2-core machine OpenBLAS's own threading gives
// ~no gain at 2 threads (measured in docs/benchmarks.md), while two single-threaded calls on
// the two halves of C run side by side at ~1.5x. The pieces are chosen from the SHAPE ONLY, so
// that path's results do not depend on the thread count either (but do depend on M).
#include "kernels/gemm.h"

#include <algorithm>
#include <cstdlib>
#include <string>

#include "kernels/gemm_blas.h"
#include "kernels/gemm_packed.h"
#include "kernels/gemm_rows.h"
#include "kernels/gemm_tiles_impl.h"
#include "kernels/parallel.h"
#include "tfm/error.h"
#include "tfm/runtime.h"

namespace tfm::kernels {
namespace gemm_tiles {
const packed::Kernel generic = make_kernel<simd::Vec<simd::Generic>, 4, 128>();
}  // namespace gemm_tiles

namespace {

const packed::Kernel& tiles() {
  switch (active_isa()) {
    case Isa::avx512: return gemm_tiles::avx512;
    case Isa::avx2: return gemm_tiles::avx2;
    default: return gemm_tiles::generic;
  }
}

// TFM_GEMM=blas: the BLAS on pieces of C (benchmarks); default "tiles".
bool use_blas() {
  static const bool blas = [] {
    const char* env = std::getenv("TFM_GEMM");
    if (env == nullptr || *env == '\0' || std::string(env) == "tiles") return false;
    TFM_CHECK(std::string(env) == "blas", "TFM_GEMM", "unknown fp32 GEMM '", env, "' (allowed: tiles, blas)");
    return true;
  }();
  return blas;
}

// Below this many multiply-adds a GEMM is one call: threading would cost more than it saves.
constexpr std::int64_t kMinPieceWork = std::int64_t{1} << 21;  // ~ 128^3
// Up to 8 pieces: an even split for 1, 2, 4 or 8 threads. More pieces would only repack the
// shared operand more often.
constexpr std::int64_t kMaxPieces = 8;
// Piece boundaries fall on multiples of these (BLAS micro-kernels are 16..64 wide).
constexpr std::int64_t kColUnit = 64, kRowUnit = 16;

struct Plan {
  bool split_cols = true;   // cut N (else M)
  std::int64_t unit = 64;   // boundary granularity along the cut dimension
  std::int64_t pieces = 1;  // number of pieces (1 = a single call)
};

Plan plan(std::int64_t M, std::int64_t N, std::int64_t K) {
  Plan p;
  p.split_cols = N >= M;
  p.unit = p.split_cols ? kColUnit : kRowUnit;
  const std::int64_t extent = p.split_cols ? N : M;
  const std::int64_t units = (extent + p.unit - 1) / p.unit;
  const std::int64_t work = M * N * std::max<std::int64_t>(K, 1);
  p.pieces = std::clamp<std::int64_t>(std::min(units, work / kMinPieceWork), 1, kMaxPieces);
  return p;
}

// C = beta * C when K == 0 (no products): BLAS convention, beta == 0 overwrites NaN/Inf.
void scale_c(std::int64_t M, std::int64_t N, float beta, float* C, std::int64_t ldc) {
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
}

}  // namespace

void gemm(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* A,
          std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) return scale_c(M, N, beta, C, ldc);
  // Few rows (decoding): the row kernel streams B without packing it (gemm_rows.h). Its B (K, N)
  // path sums in the tiles' order, so those rows equal the tiles' bit for bit; its Bᵀ path sums
  // in lanes (a row's result is still independent of the rows beside it and of M <= 16).
  if (!ta && M <= kRowInvariantMaxRows) return gemm_rows(tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  if (!use_blas()) return packed::run(tiles(), ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, nullptr);
  const Plan p = plan(M, N, K);
  if (p.pieces == 1) return blas::sgemm_1t(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  const std::int64_t extent = p.split_cols ? N : M;
  const std::int64_t units = (extent + p.unit - 1) / p.unit;
  parallel_for(p.pieces, 1, [&](std::int64_t first, std::int64_t last) {
    for (std::int64_t piece = first; piece < last; ++piece) {
      const std::int64_t s = std::min(extent, piece * units / p.pieces * p.unit);
      const std::int64_t e = std::min(extent, (piece + 1) * units / p.pieces * p.unit);
      if (s >= e) continue;
      if (p.split_cols) {  // C[:, s:e] = op(A) op(B)[:, s:e]; op(B) columns are B rows when tb
        blas::sgemm_1t(ta, tb, M, e - s, K, alpha, A, lda, tb ? B + s * ldb : B + s, ldb, beta, C + s, ldc);
      } else {             // C[s:e, :] = op(A)[s:e, :] op(B); op(A) rows are A columns when ta
        blas::sgemm_1t(ta, tb, e - s, N, K, alpha, ta ? A + s : A + s * lda, lda, B, ldb, beta, C + s * ldc, ldc);
      }
    }
  });
}

void gemm_batched(bool ta, bool tb, std::int64_t batch, std::int64_t M, std::int64_t N, std::int64_t K, float alpha,
                  const float* A, std::int64_t lda, std::int64_t stride_a, const float* B, std::int64_t ldb,
                  std::int64_t stride_b, float beta, float* C, std::int64_t ldc, std::int64_t stride_c) {
  if (batch <= 0 || M <= 0 || N <= 0) return;
  // Many items: items spread over the threads, each product on one thread. Few items (fewer
  // than kMaxPieces): each item uses all threads. Every element is computed the same way
  // either way, so the choice changes no result.
  const bool per_item = batch >= kMaxPieces || (use_blas() && plan(M, N, K).pieces == 1);
  if (per_item) {
    parallel_for(batch, 1, [&](std::int64_t b0, std::int64_t b1) {
      for (std::int64_t b = b0; b < b1; ++b) {
        float* c = C + b * stride_c;
        const float* a = A + b * stride_a;
        const float* bb = B + b * stride_b;
        if (K <= 0) {
          scale_c(M, N, beta, c, ldc);
        } else if (use_blas()) {
          blas::sgemm_1t(ta, tb, M, N, K, alpha, a, lda, bb, ldb, beta, c, ldc);
        } else {
          gemm(ta, tb, M, N, K, alpha, a, lda, bb, ldb, beta, c, ldc);  // serial inside the region
        }
      }
    });
    return;
  }
  for (std::int64_t b = 0; b < batch; ++b)
    gemm(ta, tb, M, N, K, alpha, A + b * stride_a, lda, B + b * stride_b, ldb, beta, C + b * stride_c, ldc);
}

void gemm_naive(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* A,
                std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc) {
  for (std::int64_t i = 0; i < M; ++i) {
    for (std::int64_t j = 0; j < N; ++j) {
      double acc = 0.0;
      for (std::int64_t k = 0; k < K; ++k) {
        const float a = ta ? A[k * lda + i] : A[i * lda + k];  // op(A)[i, k]
        const float b = tb ? B[j * ldb + k] : B[k * ldb + j];  // op(B)[k, j]
        acc += static_cast<double>(a) * b;
      }
      float& c = C[i * ldc + j];
      c = static_cast<float>(alpha * acc + (beta == 0.0f ? 0.0 : static_cast<double>(beta) * c));
    }
  }
}

void gemm_blas_direct(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* A,
                      std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc,
                      int blas_threads) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) return scale_c(M, N, beta, C, ldc);
  blas::sgemm_threads(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, std::max(1, blas_threads));
}

const char* gemm_backend_name() {
  static const std::string name =
      use_blas() ? std::string(blas::name()) + " (single-threaded calls on pieces of C, split by tfm; TFM_GEMM=blas)"
                 : std::string("tfm tiles (one FMA chain per element: rows independent of the batch; TFM_GEMM=blas: ") +
                       blas::name() + ")";
  return name.c_str();
}

}  // namespace tfm::kernels
