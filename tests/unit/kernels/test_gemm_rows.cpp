// Few-row GEMM (kernels/gemm_rows.h): against the naive twin for every ISA at odd sizes, and
// the property it exists for — a row's result is bit-identical whatever rows sit beside it,
// whatever the thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/gemm_rows.h"
#include "support/test_support.h"
#include "tfm/runtime.h"

using namespace tfm;

namespace {

std::vector<float> floats(std::int64_t n, std::uint64_t seed) {
  return test::random_tensor({std::max<std::int64_t>(n, 1)}, seed).to_floats();
}

std::vector<Isa> isas() {
  std::vector<Isa> out{Isa::generic};
  if (cpu_best_isa() >= Isa::avx2) out.push_back(Isa::avx2);
  if (cpu_best_isa() >= Isa::avx512) out.push_back(Isa::avx512);
  return out;
}

struct IsaGuard {
  Isa saved = active_isa();
  ~IsaGuard() { set_active_isa(saved); }
};

}  // namespace

TEST(GemmRows, MatchesNaiveTwinAtOddSizesForEveryIsa) {
  IsaGuard guard;
  for (const Isa isa : isas()) {
    set_active_isa(isa);
    for (const bool tb : {true, false})
      for (const std::int64_t M : {1, 3, 4, 5, 16})
        for (const std::int64_t N : {1, 7, 31, 33, 257, 600})
          for (const std::int64_t K : {1, 7, 32, 33, 257, 300}) {
            const std::int64_t lda = K + 3, ldb = (tb ? K : N) + 5, ldc = N + 2;
            const auto A = floats(M * lda, 1), B = floats((tb ? N : K) * ldb, 2);
            for (const float beta : {0.0f, 0.5f}) {
              std::vector<float> got = floats(M * ldc, 3), want = got;
              kernels::gemm_rows(tb, M, N, K, 1.5f, A.data(), lda, B.data(), ldb, beta, got.data(), ldc);
              kernels::gemm_naive(false, tb, M, N, K, 1.5f, A.data(), lda, B.data(), ldb, beta, want.data(), ldc);
              for (std::int64_t i = 0; i < M; ++i)
                for (std::int64_t j = 0; j < ldc; ++j) {
                  const float g = got[static_cast<std::size_t>(i * ldc + j)], w = want[static_cast<std::size_t>(i * ldc + j)];
                  if (j < N) {
                    ASSERT_NEAR(g, w, 1e-5 * (K + 1) + 1e-5 * std::fabs(w))
                        << isa_name(isa) << " tb=" << tb << " M=" << M << " N=" << N << " K=" << K << " at " << i << "," << j;
                  } else {
                    ASSERT_EQ(std::memcmp(&g, &w, 4), 0) << "padding column written";
                  }
                }
            }
          }
  }
}

TEST(GemmRows, EachRowIsBitIdenticalWhateverRowsAndThreadsSurroundIt) {
  IsaGuard guard;
  const int saved_threads = num_threads();
  for (const Isa isa : isas()) {
    set_active_isa(isa);
    for (const bool tb : {true, false}) {
      const std::int64_t N = 777, K = 515, M = kernels::kRowInvariantMaxRows;
      const auto A = floats(M * K, 4), B = floats(N * K, 5);
      std::vector<float> all(static_cast<std::size_t>(M * N));
      set_num_threads(2);
      kernels::gemm(false, tb, M, N, K, 1.0f, A.data(), K, B.data(), tb ? K : N, 0.0f, all.data(), N);
      for (const int threads : {1, 2})
        for (std::int64_t rows : {1, 3, 8}) {
          set_num_threads(threads);
          for (std::int64_t first = 0; first + rows <= M; first += 5) {
            std::vector<float> part(static_cast<std::size_t>(rows * N));
            kernels::gemm(false, tb, rows, N, K, 1.0f, A.data() + first * K, K, B.data(), tb ? K : N, 0.0f,
                          part.data(), N);
            ASSERT_EQ(std::memcmp(part.data(), all.data() + first * N, part.size() * 4), 0)
                << isa_name(isa) << " tb=" << tb << ": rows " << first << ".." << first + rows - 1 << " alone, "
                << threads << " threads, differ from the same rows in a batch of " << M;
          }
        }
    }
  }
  set_num_threads(saved_threads);
}
