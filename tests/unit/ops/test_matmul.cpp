// matmul / linear ops: finite-difference gradients, non-contiguous views (transposes read in
// place, strided slices copied), thread-count invariance, and error messages.
#include <gtest/gtest.h>

#include "support/test_support.h"
#include "tfm/tfm.h"

using namespace tfm;

namespace {
// Plain-loop reference for 2-D a @ b via element reads (any strides).
Tensor naive_mm(const Tensor& a, const Tensor& b) {
  const std::vector<float> A = a.to_floats(), B = b.to_floats();
  const std::int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  std::vector<float> C(static_cast<std::size_t>(M * N));
  for (std::int64_t i = 0; i < M; ++i)
    for (std::int64_t j = 0; j < N; ++j) {
      double s = 0;
      for (std::int64_t k = 0; k < K; ++k) s += double(A[i * K + k]) * B[k * N + j];
      C[i * N + j] = float(s);
    }
  return Tensor::from_floats(C, {M, N});
}
}  // namespace

TEST(Matmul, GradcheckBroadcastBatch) {
  EXPECT_TRUE(test::gradcheck([](const auto& x) { return matmul(x[0], x[1]); },
                              {test::random_tensor({2, 1, 3, 4}, 1), test::random_tensor({3, 4, 5}, 2)}, 1e-2, 2e-2,
                              2e-3, "matmul bcast"));
}

TEST(Matmul, GradcheckTransposedViewsAndVectors) {
  EXPECT_TRUE(test::gradcheck(
      [](const auto& x) { return matmul(transpose(x[0], 1, 2), transpose(x[1], 0, 1)); },
      {test::random_tensor({2, 5, 3}, 3), test::random_tensor({4, 5}, 4)}, 1e-2, 2e-2, 2e-3, "matmul trans"));
  EXPECT_TRUE(test::gradcheck([](const auto& x) { return matmul(x[0], x[1]); },
                              {test::random_tensor({5}, 5), test::random_tensor({2, 5, 3}, 6)}, 1e-2, 2e-2, 2e-3,
                              "vec @ batch"));
}

TEST(Linear, GradcheckWithAndWithoutBias) {
  EXPECT_TRUE(test::gradcheck([](const auto& x) { return linear(x[0], x[1], x[2]); },
                              {test::random_tensor({2, 3, 6}, 7), test::random_tensor({4, 6}, 8),
                               test::random_tensor({4}, 9)},
                              1e-2, 2e-2, 2e-3, "linear"));
  EXPECT_TRUE(test::gradcheck([](const auto& x) { return linear(x[0], x[1]); },
                              {test::random_tensor({6}, 10), test::random_tensor({4, 6}, 11)}, 1e-2, 2e-2, 2e-3,
                              "linear 1-D x"));
}

TEST(Matmul, StridedSliceOperandsAreCopiedAndCorrect) {
  // Every other column and every other row: neither row- nor column-major, so matmul copies.
  Tensor a = slice(slice(test::random_tensor({10, 14}, 12), 1, 0, 14, 2), 0, 0, 10, 2);  // (5, 7)
  Tensor b = slice(test::random_tensor({7, 9}, 13), 1, 1, 9, 3);                       // (7, 3)
  ASSERT_FALSE(a.is_contiguous());
  test::expect_close(matmul(a, b), naive_mm(a, b), 1e-5, 1e-5, "strided");
  EXPECT_TRUE(test::gradcheck([](const auto& x) { return matmul(slice(x[0], 1, 0, 14, 2), x[1]); },
                              {test::random_tensor({5, 14}, 14), test::random_tensor({7, 3}, 15)}, 1e-2, 2e-2, 2e-3,
                              "strided grad"));
  // A batch whose items are not at one uniform stride (a permuted, sliced batch): per-item calls.
  Tensor big = test::random_tensor({4, 3, 6, 5}, 16);
  Tensor c = slice(permute(big, {1, 0, 2, 3}), 1, 0, 4, 3);  // (3, 2, 6, 5)
  Tensor d = test::random_tensor({5, 2}, 17);
  Tensor y = matmul(c, d);
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 2; ++j) {
      Tensor ci = squeeze(squeeze(slice(slice(c, 0, i, i + 1), 1, j, j + 1), 0), 0);
      Tensor yi = squeeze(squeeze(slice(slice(y, 0, i, i + 1), 1, j, j + 1), 0), 0);
      test::expect_close(yi, naive_mm(ci, d), 1e-5, 1e-5, "batch item");
    }
}

TEST(Matmul, BitIdenticalAcrossThreadCountsForwardAndBackward) {
  const int saved = num_threads();
  std::vector<std::vector<Tensor>> runs;
  for (int t : {1, 2}) {
    set_num_threads(t);
    Tensor x = test::random_tensor({4, 64, 96}, 20).requires_grad_();
    Tensor w = test::random_tensor({384, 96}, 21).requires_grad_();
    Tensor b = test::random_tensor({384}, 22).requires_grad_();
    Tensor m = test::random_tensor({4, 384, 128}, 23).requires_grad_();
    Tensor y = matmul(linear(x, w, b), m);  // (4, 64, 128)
    backward(y, test::random_tensor(y.shape(), 24));
    runs.push_back({y, x.grad(), w.grad(), b.grad(), m.grad()});
  }
  set_num_threads(saved);
  const char* names[] = {"y", "grad x", "grad w", "grad b", "grad m"};
  for (std::size_t i = 0; i < runs[0].size(); ++i) test::expect_bitwise_equal(runs[0][i], runs[1][i], names[i]);
}

TEST(Matmul, BadShapesNameTheOpAndSizes) {
  auto message = [](auto&& fn) {
    try {
      fn();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string m1 = message([] { matmul(Tensor::zeros({2, 3}), Tensor::zeros({4, 5})); });
  EXPECT_NE(m1.find("[matmul]"), std::string::npos) << m1;
  EXPECT_NE(m1.find("3 != 4"), std::string::npos) << m1;
  const std::string m2 = message([] { matmul(Tensor::zeros({2, 2, 3}), Tensor::zeros({3, 3, 5})); });
  EXPECT_NE(m2.find("broadcast"), std::string::npos) << m2;
  const std::string m3 = message([] { linear(Tensor::zeros({2, 3}), Tensor::zeros({4, 5})); });
  EXPECT_NE(m3.find("[linear]"), std::string::npos) << m3;
  const std::string m4 = message([] { linear(Tensor::zeros({2, 5}), Tensor::zeros({4, 5}), Tensor::zeros({3})); });
  EXPECT_NE(m4.find("b must be (4)"), std::string::npos) << m4;
  const std::string m5 = message([] { matmul(Tensor::zeros({2, 3}, DType::bf16), Tensor::zeros({3, 2})); });
  EXPECT_NE(m5.find("f32"), std::string::npos) << m5;
  const std::string m6 = message([] { matmul(Tensor::zeros({2, 3}), Tensor::zeros(Shape{})); });
  EXPECT_NE(m6.find("1-D"), std::string::npos) << m6;
}

TEST(Matmul, EmptyAndZeroInnerDims) {
  EXPECT_EQ(matmul(Tensor::zeros({0, 3}), Tensor::zeros({3, 4})).shape(), (Shape{0, 4}));
  Tensor z = matmul(Tensor::zeros({2, 0}), Tensor::zeros({0, 3}));
  for (float v : z.to_floats()) EXPECT_EQ(v, 0.0f);
}
