// bf16 GEMM (kernels/gemm_bf16.h): every path against its twins at odd sizes, for every ISA.
//   1. bit-exact against the scalar twin of the pair order (gemm_bf16_ordered): the native
//      VDPBF16PS kernel and the emulated kernels of every ISA compute the same sums;
//   2. within the fp32-accumulation bound of the naive twin (bf16-rounded products in double);
//   3. within bf16's bound of the exact fp32 product (gemm_naive):
//        |C - A·B| <= (2u + u² + K v/(1 - K v)) Σ|a_k b_k|,  u = 2^-8, v = 2^-24;
//   4. thread count and blocking never change a bit.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/gemm_bf16.h"
#include "support/test_support.h"
#include "tfm/runtime.h"

using namespace tfm;
using kernels::Bf16Path;

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

struct Guard {
  Isa isa = active_isa();
  Bf16Path path = kernels::bf16_path();
  int threads = num_threads();
  ~Guard() {
    set_active_isa(isa);
    kernels::set_bf16_path(path);
    set_num_threads(threads);
  }
};

// Every (isa, path) pair this machine can run; onednn only where the build has it.
struct Config {
  Isa isa;
  Bf16Path path;
};
std::vector<Config> configs() {
  std::vector<Config> out;
  for (const Isa isa : isas()) {
    out.push_back({isa, Bf16Path::emulated});
    if (isa == Isa::avx512 && cpu_info().avx512_bf16) out.push_back({isa, Bf16Path::native});
  }
  return out;
}

std::uint32_t bits(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

}  // namespace

TEST(GemmBf16, RoundingIsNearestEvenWithDenormalsFlushed) {
  EXPECT_EQ(kernels::round_bf16(1.0f), 1.0f);
  // 1 + 2^-8 is halfway between bf16 neighbours 1 and 1 + 2^-7: ties to even (1).
  EXPECT_EQ(kernels::round_bf16(1.0f + 0x1p-8f), 1.0f);
  EXPECT_EQ(kernels::round_bf16(1.0f + 0x1p-8f + 0x1p-20f), 1.0f + 0x1p-7f);
  EXPECT_EQ(kernels::round_bf16(1.0f + 3 * 0x1p-8f), 1.0f + 0x1p-6f);  // tie, odd below: up
  EXPECT_EQ(bits(kernels::round_bf16(-1e-40f)), 0x80000000u);          // denormal -> -0
  EXPECT_TRUE(std::isnan(kernels::round_bf16(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isinf(kernels::round_bf16(std::numeric_limits<float>::max())));  // rounds up to inf
  EXPECT_EQ(kernels::round_bf16(std::numeric_limits<float>::infinity()), std::numeric_limits<float>::infinity());
}

TEST(GemmBf16, EveryPathMatchesOrderedTwinBitForBitAndBoundsHold) {
  Guard guard;
  const double u = std::ldexp(1.0, -8), v = std::ldexp(1.0, -24);
  for (const Config cfg : configs()) {
    set_active_isa(cfg.isa);
    kernels::set_bf16_path(cfg.path);
    for (const bool ta : {false, true})
      for (const bool tb : {false, true})
        for (const std::int64_t M : {1, 7, 33})
          for (const std::int64_t N : {1, 31, 33, 70})
            for (const std::int64_t K : {1, 2, 31, 64, 129}) {
              const std::int64_t lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 5, ldc = N + 2;
              const auto A = floats((ta ? K : M) * lda, 11), B = floats((tb ? N : K) * ldb, 12);
              std::vector<float> got = floats(M * ldc, 13), ordered = got, naive = got, exact = got;
              kernels::gemm_bf16(ta, tb, M, N, K, 1.0f, A.data(), lda, B.data(), ldb, 0.0f, got.data(), ldc);
              kernels::gemm_bf16_ordered(ta, tb, M, N, K, 1.0f, A.data(), lda, B.data(), ldb, 0.0f, ordered.data(), ldc);
              kernels::gemm_bf16_naive(ta, tb, M, N, K, 1.0f, A.data(), lda, B.data(), ldb, 0.0f, naive.data(), ldc);
              kernels::gemm_naive(ta, tb, M, N, K, 1.0f, A.data(), lda, B.data(), ldb, 0.0f, exact.data(), ldc);
              for (std::int64_t i = 0; i < M; ++i)
                for (std::int64_t j = 0; j < ldc; ++j) {
                  const std::size_t at = static_cast<std::size_t>(i * ldc + j);
                  ASSERT_EQ(bits(got[at]), bits(ordered[at]))
                      << isa_name(cfg.isa) << "/" << kernels::bf16_path_name(cfg.path) << " ta=" << ta << " tb=" << tb
                      << " M=" << M << " N=" << N << " K=" << K << " at " << i << "," << j;
                  if (j >= N) continue;  // padding column: checked untouched by the equality above
                  double abs_sum = 0.0;
                  for (std::int64_t k = 0; k < K; ++k) {
                    const double a = ta ? A[static_cast<std::size_t>(k * lda + i)] : A[static_cast<std::size_t>(i * lda + k)];
                    const double b = tb ? B[static_cast<std::size_t>(j * ldb + k)] : B[static_cast<std::size_t>(k * ldb + j)];
                    abs_sum += std::fabs(a * b);
                  }
                  const double acc_bound = K * v / (1 - K * v) * abs_sum * 1.02 + 1e-30;
                  ASSERT_LE(std::fabs(got[at] - naive[at]), acc_bound) << "fp32 accumulation bound, K=" << K;
                  ASSERT_LE(std::fabs(got[at] - exact[at]), (2 * u + u * u) * abs_sum * 1.02 + acc_bound)
                      << "bf16 bound, K=" << K;
                }
            }
  }
}

TEST(GemmBf16, AlphaBetaFollowTheBlasConvention) {
  Guard guard;
  for (const Config cfg : configs()) {
    set_active_isa(cfg.isa);
    kernels::set_bf16_path(cfg.path);
    const std::int64_t M = 9, N = 35, K = 17;
    const auto A = floats(M * K, 21), B = floats(K * N, 22);
    std::vector<float> got = floats(M * N, 23), want = got;
    kernels::gemm_bf16(false, false, M, N, K, 0.5f, A.data(), K, B.data(), N, 2.0f, got.data(), N);
    kernels::gemm_bf16_naive(false, false, M, N, K, 0.5f, A.data(), K, B.data(), N, 2.0f, want.data(), N);
    for (std::size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5 * (1 + std::fabs(want[i])));
    std::vector<float> nan_c(static_cast<std::size_t>(M * N), std::numeric_limits<float>::quiet_NaN());
    kernels::gemm_bf16(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, nan_c.data(), N);
    for (const float x : nan_c) ASSERT_FALSE(std::isnan(x)) << "beta = 0 must overwrite C";
  }
}

TEST(GemmBf16, ThreadCountNeverChangesABit) {
  Guard guard;
  const std::int64_t M = 300, N = 200, K = 96;
  const auto A = floats(M * K, 31), B = floats(N * K, 32);
  for (const Config cfg : configs()) {
    set_active_isa(cfg.isa);
    kernels::set_bf16_path(cfg.path);
    std::vector<float> one(static_cast<std::size_t>(M * N)), two = one;
    set_num_threads(1);
    kernels::gemm_bf16(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, one.data(), N);
    set_num_threads(2);
    kernels::gemm_bf16(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, two.data(), N);
    ASSERT_EQ(std::memcmp(one.data(), two.data(), one.size() * sizeof(float)), 0) << kernels::bf16_path_name(cfg.path);
  }
}

TEST(GemmBf16, OneDnnPathIsWithinTheBoundWhereBuilt) {
  Guard guard;
  // oneDNN builds a bf16 matmul only on CPUs with the instructions for one (not on AVX2-only
  // ones, nor under TFM_ISA=avx2|generic, which caps it): a hardware skip (tests/hardware_skips.txt).
  if (!kernels::bf16_path_available(Bf16Path::onednn)) GTEST_SKIP() << "oneDNN builds no bf16 matmul on this CPU/build";
  kernels::set_bf16_path(Bf16Path::onednn);
  const std::int64_t M = 37, N = 45, K = 130;
  const auto A = floats(M * K, 41), B = floats(K * N, 42);
  std::vector<float> got(static_cast<std::size_t>(M * N)), naive = got;
  kernels::gemm_bf16(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, got.data(), N);
  kernels::gemm_bf16_naive(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, naive.data(), N);
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], naive[i], 1e-4 * (1 + std::fabs(naive[i])));
}

TEST(GemmBf16, LongKIsBlockedWithoutChangingTheChain) {
  Guard guard;
  const std::int64_t M = 9, N = 40, K = 1031;  // > 2 blocks of 256 pairs, odd
  for (const Config cfg : configs()) {
    set_active_isa(cfg.isa);
    kernels::set_bf16_path(cfg.path);
    for (const bool ta : {false, true}) {
      const auto A = floats(M * K, 51), B = floats(K * N, 52);
      std::vector<float> got(static_cast<std::size_t>(M * N)), ordered = got;
      const std::int64_t lda = ta ? M : K;
      kernels::gemm_bf16(ta, false, M, N, K, 1.0f, A.data(), lda, B.data(), N, 0.0f, got.data(), N);
      kernels::gemm_bf16_ordered(ta, false, M, N, K, 1.0f, A.data(), lda, B.data(), N, 0.0f, ordered.data(), N);
      ASSERT_EQ(std::memcmp(got.data(), ordered.data(), got.size() * sizeof(float)), 0)
          << isa_name(cfg.isa) << "/" << kernels::bf16_path_name(cfg.path) << " ta=" << ta;
    }
  }
}

// gemm_bf16_bias (the Linear forward's fused epilogue) is the product and then the add,
// bit for bit: on every path, with edge tiles, a K-blocked chain (K > 512) and K = 0.
TEST(GemmBf16, FusedBiasEqualsTheProductThenTheAdd) {
  Guard guard;
  std::vector<Config> all = configs();
  if (kernels::bf16_path_available(Bf16Path::onednn)) all.push_back({cpu_best_isa(), Bf16Path::onednn});
  std::string ran;
  for (const Config cfg : all) ran += std::string(" ") + isa_name(cfg.isa) + "/" + kernels::bf16_path_name(cfg.path);
  std::cout << "paths:" << ran << "\n";
  for (const Config cfg : all) {
    set_active_isa(cfg.isa);
    kernels::set_bf16_path(cfg.path);
    for (const bool tb : {false, true})
      for (const std::int64_t M : {1, 13, 40})
        for (const std::int64_t N : {1, 33, 70})
          for (const std::int64_t K : {0, 7, 64, 1031}) {
            const std::int64_t lda = K + 1, ldb = (tb ? K : N) + 3, ldc = N + 2;
            const auto A = floats(M * lda, 61), B = floats((tb ? N : K) * ldb, 62), bias = floats(N, 63);
            std::vector<float> fused = floats(M * ldc, 64), separate = fused;
            kernels::gemm_bf16_bias(false, tb, M, N, K, A.data(), lda, B.data(), ldb, bias.data(), fused.data(), ldc);
            kernels::gemm_bf16(false, tb, M, N, K, 1.0f, A.data(), lda, B.data(), ldb, 0.0f, separate.data(), ldc);
            for (std::int64_t i = 0; i < M; ++i)
              for (std::int64_t j = 0; j < N; ++j) separate[static_cast<std::size_t>(i * ldc + j)] += bias[static_cast<std::size_t>(j)];
            ASSERT_EQ(std::memcmp(fused.data(), separate.data(), fused.size() * sizeof(float)), 0)
                << isa_name(cfg.isa) << "/" << kernels::bf16_path_name(cfg.path) << " tb=" << tb << " M=" << M
                << " N=" << N << " K=" << K;
          }
  }
}

TEST(GemmBf16, PackingRoundsTiesAndDenormalsLikeTheScalarRule) {
  Guard guard;
  // Operands full of rounding ties (bf16 value + half an ulp), fp32 denormals and values near
  // the top of the range, through every path's packing (both transposes).
  const std::int64_t M = 11, N = 37, K = 45;
  std::vector<float> A = floats(M * K, 61), B = floats(K * N, 62);
  for (std::size_t i = 0; i < A.size(); ++i) {
    if (i % 3 == 0) A[i] = kernels::round_bf16(A[i]) * (1.0f + 0x1p-8f);
    if (i % 7 == 0) A[i] = (i % 2 ? 1.0f : -1.0f) * 1e-39f;
    if (i % 11 == 0) A[i] = 1e30f;
  }
  for (std::size_t i = 0; i < B.size(); ++i) {
    if (i % 3 == 1) B[i] = kernels::round_bf16(B[i]) * (1.0f - 0x1p-9f);
    if (i % 5 == 0) B[i] = -2e-39f;
  }
  for (const Config cfg : configs()) {
    set_active_isa(cfg.isa);
    kernels::set_bf16_path(cfg.path);
    for (const bool ta : {false, true})
      for (const bool tb : {false, true}) {
        std::vector<float> got(static_cast<std::size_t>(M * N)), want = got;
        const std::int64_t lda = ta ? M : K, ldb = tb ? K : N;
        kernels::gemm_bf16(ta, tb, M, N, K, 1.0f, A.data(), lda, B.data(), ldb, 0.0f, got.data(), N);
        kernels::gemm_bf16_ordered(ta, tb, M, N, K, 1.0f, A.data(), lda, B.data(), ldb, 0.0f, want.data(), N);
        ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0)
            << isa_name(cfg.isa) << "/" << kernels::bf16_path_name(cfg.path) << " ta=" << ta << " tb=" << tb;
      }
  }
}
