// The compact-weight API's contracts that hold for every implementation: block sizes and row
// bytes, one-line errors for rows that do not fit a block, and the naive twin's product equal
// to an f32 matmul over the dequantized weights.
#include <gtest/gtest.h>

#include <vector>

#include "kernels/qgemm.h"
#include "tfm/error.h"

namespace tfm {
namespace {

TEST(Qgemm, BlockSizesAndRowBytes) {
  EXPECT_EQ(dtype_row_bytes(DType::f32, 7), 28u);
  EXPECT_EQ(dtype_row_bytes(DType::bf16, 7), 14u);
  EXPECT_EQ(dtype_row_bytes(DType::q8_0, 64), 68u);
  EXPECT_EQ(dtype_row_bytes(DType::q4_0, 32), 18u);
  EXPECT_EQ(dtype_row_bytes(DType::q4_k, 512), 288u);
  EXPECT_EQ(dtype_row_bytes(DType::q6_k, 256), 210u);
  EXPECT_TRUE(dtype_is_block(DType::q6_k));
  EXPECT_FALSE(dtype_is_block(DType::bf16));
  EXPECT_EQ(dtype_from_name("q4_k"), DType::q4_k);
}

TEST(Qgemm, RowThatDoesNotFitABlockIsAOneLineError) {
  try {
    (void)dtype_row_bytes(DType::q4_k, 384);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("q4_k"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("384"), std::string::npos);
  }
  EXPECT_THROW((void)dtype_size(DType::q8_0), Error);
}

TEST(Qgemm, NaiveProductOfQ8RowsEqualsF32ProductOfTheirDequantization) {
  const std::int64_t M = 3, N = 5, K = 64;
  std::vector<float> w(N * K), x(M * K);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(static_cast<int>(i * 37 % 101) - 50) / 25.0f;
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(static_cast<int>(i * 13 % 29) - 14) / 7.0f;
  std::vector<unsigned char> q(dtype_row_bytes(DType::q8_0, K) * N);
  kernels::quantize_rows(DType::q8_0, w.data(), q.data(), N, K);
  std::vector<float> deq(N * K);
  kernels::dequantize_rows(DType::q8_0, q.data(), deq.data(), N, K);
  std::vector<float> y(M * N), expect(M * N);
  kernels::qgemm_naive(DType::q8_0, M, N, K, x.data(), K, q.data(), y.data(), N);
  for (std::int64_t m = 0; m < M; ++m)
    for (std::int64_t n = 0; n < N; ++n) {
      float acc = 0.0f;
      for (std::int64_t k = 0; k < K; ++k) acc += x[m * K + k] * deq[n * K + k];
      expect[m * N + n] = acc;
    }
  EXPECT_EQ(y, expect);
  // Quantization error of q8_0 is at most half a step (d / 2, d = max|w| / 127) per weight.
  for (std::size_t i = 0; i < w.size(); ++i) EXPECT_NEAR(deq[i], w[i], 2.0f / 127.0f / 2.0f + 2e-3f);
}

}  // namespace
}  // namespace tfm
