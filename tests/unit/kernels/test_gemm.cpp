// fp32 GEMM kernel: gemm / gemm_batched against the double-accumulating naive twin, every
// transpose combination, alpha/beta, padded leading dimensions, and thread-count invariance;
// the tiles of every ISA against the scalar chain that defines their order, and each row's
// result independent of the batch around it (the promise training and prefill rely on).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/gemm.h"
#include "support/test_support.h"
#include "tfm/runtime.h"

using namespace tfm;
using kernels::gemm;

namespace {

std::vector<float> random_floats(std::int64_t n, std::uint64_t seed) {
  return test::random_tensor({std::max<std::int64_t>(n, 1)}, seed).to_floats();
}

// One operand stored with padding: rows x cols with leading dimension ld >= cols.
struct Mat {
  std::int64_t rows, cols, ld;
  std::vector<float> v;
  Mat(std::int64_t r, std::int64_t c, std::int64_t pad, std::uint64_t seed)
      : rows(r), cols(c), ld(c + pad), v(random_floats(r * (c + pad), seed)) {}
};

// |got - want| <= atol + rtol |want| on the M x N window; the padding must be untouched.
void expect_gemm_close(const std::vector<float>& got, const std::vector<float>& want, std::int64_t M,
                       std::int64_t N, std::int64_t ldc, std::int64_t K, const std::string& what) {
  const double atol = 2e-6 * (K + 1), rtol = 1e-5;
  int bad = 0;
  for (std::int64_t i = 0; i < M && bad < 5; ++i)
    for (std::int64_t j = 0; j < ldc && bad < 5; ++j) {
      const float g = got[static_cast<std::size_t>(i * ldc + j)], w = want[static_cast<std::size_t>(i * ldc + j)];
      const bool ok = j < N ? std::fabs(g - w) <= atol + rtol * std::fabs(w) : std::memcmp(&g, &w, 4) == 0;
      if (!ok) {
        ADD_FAILURE() << what << " at (" << i << "," << j << "): " << g << " vs " << w;
        ++bad;
      }
    }
}

void check_one(bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, float beta,
               std::int64_t pad) {
  const Mat A(ta ? K : M, ta ? M : K, pad, 1 + M), B(tb ? N : K, tb ? K : N, pad, 2 + N);
  Mat C(M, N, pad, 3 + K);
  std::vector<float> want = C.v;
  kernels::gemm_naive(ta, tb, M, N, K, alpha, A.v.data(), A.ld, B.v.data(), B.ld, beta, want.data(), C.ld);
  gemm(ta, tb, M, N, K, alpha, A.v.data(), A.ld, B.v.data(), B.ld, beta, C.v.data(), C.ld);
  expect_gemm_close(C.v, want, M, N, C.ld, K,
                    "gemm ta=" + std::to_string(ta) + " tb=" + std::to_string(tb) + " M=" + std::to_string(M) +
                        " N=" + std::to_string(N) + " K=" + std::to_string(K));
}

}  // namespace

TEST(Gemm, MatchesNaiveAllSizesAndTransposes) {
  const std::int64_t sizes[] = {1, 7, 31, 32, 33, 257};
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (std::int64_t M : sizes)
        for (std::int64_t N : sizes)
          for (std::int64_t K : sizes) check_one(ta, tb, M, N, K, 1.0f, 0.0f, 0);
}

TEST(Gemm, AlphaBetaAndPaddedLeadingDims) {
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (std::int64_t s : {1, 7, 33, 257}) {
        check_one(ta, tb, s, 31, 17, 0.5f, -1.5f, 3);
        check_one(ta, tb, 40, s, 65, -2.0f, 1.0f, 5);
        check_one(ta, tb, 300, 520, s, 1.0f, 0.25f, 1);  // large enough to be split into pieces
      }
}

TEST(Gemm, LargerShapesSplitOverRowsAndColumns) {
  check_one(false, false, 1031, 96, 200, 1.0f, 0.0f, 0);  // M > N: row pieces
  check_one(false, true, 96, 1031, 200, 1.0f, 0.0f, 0);   // N > M: column pieces
  check_one(true, true, 513, 700, 129, 0.7f, 0.3f, 2);
}

TEST(Gemm, ZeroKScalesCAndBetaZeroOverwritesNaN) {
  std::vector<float> c = {1.0f, NAN, 3.0f, 4.0f};
  gemm(false, false, 2, 2, 0, 1.0f, nullptr, 1, nullptr, 2, 0.5f, c.data(), 2);
  EXPECT_EQ(c[0], 0.5f);
  EXPECT_TRUE(std::isnan(c[1]));
  gemm(false, false, 2, 2, 0, 1.0f, nullptr, 1, nullptr, 2, 0.0f, c.data(), 2);
  EXPECT_EQ(c, (std::vector<float>{0, 0, 0, 0}));
  // beta == 0 must ignore whatever C held (BLAS convention), also when K > 0.
  std::vector<float> a = {1, 2}, b = {3, 4}, c2 = {NAN};
  gemm(false, false, 1, 1, 2, 1.0f, a.data(), 2, b.data(), 1, 0.0f, c2.data(), 1);
  EXPECT_EQ(c2[0], 11.0f);
}

TEST(Gemm, BatchedMatchesNaive) {
  for (std::int64_t batch : {1, 3, 8, 13})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        const std::int64_t M = 33, N = batch < 8 ? 257 : 31, K = 65, pad = 2;
        const std::int64_t ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
        const std::int64_t lda = ac + pad, ldb = bc + pad, ldc = N + pad;
        const std::int64_t sa = ar * lda + 5, sb = br * ldb + 7, sc = M * ldc + 3;  // gaps between items
        const std::vector<float> A = random_floats(batch * sa, 11), B = random_floats(batch * sb, 12);
        std::vector<float> C = random_floats(batch * sc, 13), want = C;
        for (std::int64_t b = 0; b < batch; ++b)
          kernels::gemm_naive(ta, tb, M, N, K, 0.5f, A.data() + b * sa, lda, B.data() + b * sb, ldb, 2.0f,
                              want.data() + b * sc, ldc);
        kernels::gemm_batched(ta, tb, batch, M, N, K, 0.5f, A.data(), lda, sa, B.data(), ldb, sb, 2.0f, C.data(),
                              ldc, sc);
        for (std::int64_t b = 0; b < batch; ++b) {
          const std::vector<float> got(C.begin() + b * sc, C.begin() + b * sc + M * ldc),
              ref(want.begin() + b * sc, want.begin() + b * sc + M * ldc);
          expect_gemm_close(got, ref, M, N, ldc, K, "batched item " + std::to_string(b));
        }
        EXPECT_EQ(0, std::memcmp(C.data() + batch * sc - 3, want.data() + batch * sc - 3, 12)) << "gap written";
      }
}

TEST(Gemm, BitIdenticalAcrossThreadCounts) {
  const int saved = num_threads();
  struct Case { bool ta, tb; std::int64_t M, N, K; };
  for (const Case& c : {Case{false, false, 1024, 3072, 256}, Case{false, true, 2000, 300, 128},
                        Case{true, false, 512, 512, 512}, Case{true, true, 7, 4000, 300}}) {
    const std::vector<float> A = random_floats(c.M * c.K, 21), B = random_floats(c.K * c.N, 22);
    std::vector<std::vector<float>> out;
    for (int t : {1, 2, 3}) {
      set_num_threads(t);
      std::vector<float> C(static_cast<std::size_t>(c.M * c.N));
      gemm(c.ta, c.tb, c.M, c.N, c.K, 1.0f, A.data(), c.ta ? c.M : c.K, B.data(), c.tb ? c.K : c.N, 0.0f, C.data(),
           c.N);
      out.push_back(std::move(C));
    }
    EXPECT_EQ(0, std::memcmp(out[0].data(), out[1].data(), out[0].size() * 4)) << "1 vs 2 threads, M=" << c.M;
    EXPECT_EQ(0, std::memcmp(out[0].data(), out[2].data(), out[0].size() * 4)) << "1 vs 3 threads, M=" << c.M;
  }
  for (std::int64_t batch : {2, 12}) {
    const std::int64_t M = 64, N = 640, K = 96;
    const std::vector<float> A = random_floats(batch * M * K, 31), B = random_floats(batch * K * N, 32);
    std::vector<std::vector<float>> out;
    for (int t : {1, 2}) {
      set_num_threads(t);
      std::vector<float> C(static_cast<std::size_t>(batch * M * N));
      kernels::gemm_batched(false, false, batch, M, N, K, 1.0f, A.data(), K, M * K, B.data(), N, K * N, 0.0f,
                            C.data(), N, M * N);
      out.push_back(std::move(C));
    }
    EXPECT_EQ(0, std::memcmp(out[0].data(), out[1].data(), out[0].size() * 4)) << "batched, batch=" << batch;
  }
  set_num_threads(saved);
}

TEST(Gemm, BlasDirectMatchesNaive) {
  const std::int64_t M = 65, N = 129, K = 33;
  const std::vector<float> A = random_floats(M * K, 41), B = random_floats(K * N, 42);
  std::vector<float> C(static_cast<std::size_t>(M * N)), want = C;
  kernels::gemm_naive(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, want.data(), N);
  for (int t : {1, 2}) {
    kernels::gemm_blas_direct(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, C.data(), N, t);
    expect_gemm_close(C, want, M, N, N, K, "blas direct");
  }
  EXPECT_NE(std::string(kernels::gemm_backend_name()).size(), 0u);
}

namespace {

// The order gemm_tiles_impl.h defines: C[i, j] = alpha * chain + beta * C, the chain one
// rounding per k in order: fused multiply-add where the ISA has FMA, else a product then a sum.
void gemm_chain(bool fused, bool ta, bool tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha,
                const float* A, std::int64_t lda, const float* B, std::int64_t ldb, float beta, float* C,
                std::int64_t ldc) {
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) {
      float acc = 0.0f;
      for (std::int64_t k = 0; k < K; ++k) {
        const float a = ta ? A[k * lda + i] : A[i * lda + k], b = tb ? B[j * ldb + k] : B[k * ldb + j];
        if (fused) {
          acc = std::fma(a, b, acc);
        } else {
          const float p = a * b;
          acc = p + acc;
        }
      }
      float& c = C[i * ldc + j];
      const float s = alpha * acc;
      c = beta == 0.0f ? s : s + beta * c;
    }
}

std::vector<Isa> isas_here() {
  std::vector<Isa> out;
  for (Isa isa : {Isa::generic, Isa::avx2, Isa::avx512})
    if (static_cast<int>(isa) <= static_cast<int>(cpu_best_isa())) out.push_back(isa);
  return out;
}

struct IsaGuard {
  Isa saved = active_isa();
  ~IsaGuard() { set_active_isa(saved); }
};

}  // namespace

// Every ISA's tiles compute the chain above bit for bit: edge tiles, odd K (the -0 pad),
// K longer than one K block (sums continued through C), alpha/beta, all transposes.
TEST(Gemm, TilesComputeTheDefinedChainOnEveryIsa) {
  IsaGuard guard;
  for (const Isa isa : isas_here()) {
    set_active_isa(isa);
    for (const bool ta : {false, true})
      for (const bool tb : {false, true})
        for (const std::int64_t K : {1, 7, 64, 1031}) {
          const std::int64_t M = 37, N = 45;
          const Mat A(ta ? K : M, ta ? M : K, 3, 7 + K), B(tb ? N : K, tb ? K : N, 1, 8 + K);
          for (const float beta : {0.0f, 0.5f}) {
            Mat C(M, N, 2, 9);
            std::vector<float> want = C.v;
            gemm(ta, tb, M, N, K, 1.5f, A.v.data(), A.ld, B.v.data(), B.ld, beta, C.v.data(), C.ld);
            gemm_chain(isa != Isa::generic, ta, tb, M, N, K, 1.5f, A.v.data(), A.ld, B.v.data(), B.ld, beta,
                       want.data(), C.ld);
            ASSERT_EQ(0, std::memcmp(C.v.data(), want.data(), C.v.size() * 4))
                << isa_name(isa) << " ta=" << ta << " tb=" << tb << " K=" << K << " beta=" << beta;
          }
        }
  }
}

// A row's result does not depend on the rows around it: the same 3 rows placed at different
// offsets of batches of 17..300 rows (every tile position, the M-tail) give the same bits,
// for every transpose and ISA; with B (K, N) also the 1..16-row path gives them. Likewise a
// column wherever it sits in N.
TEST(Gemm, RowsAreBitIdenticalWhateverTheBatchOnEveryIsa) {
  IsaGuard guard;
  const std::int64_t K = 131, N = 75;
  const std::vector<float> rows = random_floats(3 * K, 51), B = random_floats(K * N, 52);
  for (const Isa isa : isas_here()) {
    set_active_isa(isa);
    for (const bool ta : {false, true})
      for (const bool tb : {false, true}) {
        std::vector<float> first;
        for (const std::int64_t M : {3, 16, 17, 40, 97, 300}) {
          if (M <= 16 && (ta || tb)) continue;  // the few-row path sums Bᵀ in lanes (gemm.cpp)
          for (const std::int64_t at : {std::int64_t{0}, M / 2 - 1, M - 3}) {
            if (at < 0) continue;
            // Neighbours: random rows; the probe rows at [at, at + 3).
            std::vector<float> a = random_floats(M * K, 60 + M);
            for (std::int64_t r = 0; r < 3; ++r)
              for (std::int64_t k = 0; k < K; ++k) {
                const float v = rows[static_cast<std::size_t>(r * K + k)];
                a[static_cast<std::size_t>(ta ? k * M + at + r : (at + r) * K + k)] = v;
              }
            std::vector<float> c(static_cast<std::size_t>(M * N));
            gemm(ta, tb, M, N, K, 1.0f, a.data(), ta ? M : K, B.data(), tb ? K : N, 0.0f, c.data(), N);
            const std::vector<float> mine(c.begin() + at * N, c.begin() + (at + 3) * N);
            if (first.empty()) first = mine;
            ASSERT_EQ(0, std::memcmp(first.data(), mine.data(), first.size() * 4))
                << isa_name(isa) << " ta=" << ta << " tb=" << tb << " M=" << M << " rows at " << at;
          }
        }
      }
    // Columns: the first 20 columns of B, alone (N = 20) and inside N = 75.
    std::vector<float> a = random_floats(40 * K, 70), whole(static_cast<std::size_t>(40 * N)), part(40 * 20);
    gemm(false, false, 40, N, K, 1.0f, a.data(), K, B.data(), N, 0.0f, whole.data(), N);
    gemm(false, false, 40, 20, K, 1.0f, a.data(), K, B.data(), N, 0.0f, part.data(), 20);
    for (std::int64_t i = 0; i < 40; ++i)
      ASSERT_EQ(0, std::memcmp(whole.data() + i * N, part.data() + i * 20, 20 * 4)) << isa_name(isa) << " row " << i;
  }
}
