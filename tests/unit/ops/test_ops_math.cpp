// Arithmetic, activation and reduction ops: values, gradient checks, broadcasting,
// non-contiguous inputs, thread-count invariance and error messages.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>

#include "support/test_support.h"
#include "tfm/tfm.h"

using namespace tfm;

namespace {
using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

Tensor positive(const Shape& shape, std::uint64_t seed) { return test::random_tensor(shape, seed, 0.5f, 2.0f); }

// The message of the tfm::Error that fn throws ("" when none).
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(OpsArith, BroadcastValues) {
  Tensor a = Tensor::from_floats({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor b = Tensor::from_floats({10, 20, 30}, {3});
  EXPECT_EQ((a + b).to_floats(), (std::vector<float>{11, 22, 33, 14, 25, 36}));
  EXPECT_EQ((a - b).to_floats(), (std::vector<float>{-9, -18, -27, -6, -15, -24}));
  Tensor c = Tensor::from_floats({2, 4}, {2, 1});
  EXPECT_EQ((a * c).to_floats(), (std::vector<float>{2, 4, 6, 16, 20, 24}));
  EXPECT_EQ((a / c).to_floats(), (std::vector<float>{0.5f, 1, 1.5f, 1, 1.25f, 1.5f}));
  EXPECT_EQ((a * 2.0f).to_floats(), (std::vector<float>{2, 4, 6, 8, 10, 12}));
  EXPECT_EQ((1.0f - a).to_floats(), (std::vector<float>{0, -1, -2, -3, -4, -5}));
  EXPECT_EQ((-a).to_floats(), (std::vector<float>{-1, -2, -3, -4, -5, -6}));
  EXPECT_EQ((a / 2.0f + 1.0f).to_floats(), (std::vector<float>{1.5f, 2, 2.5f, 3, 3.5f, 4}));
  // (2,1,3) + (1,2,1) -> (2,2,3)
  Tensor o = reshape(a, {2, 1, 3}) + reshape(c, {1, 2, 1});
  EXPECT_EQ(o.shape(), (Shape{2, 2, 3}));
  EXPECT_EQ(o.to_floats(), (std::vector<float>{3, 4, 5, 5, 6, 7, 6, 7, 8, 8, 9, 10}));
}

TEST(OpsArith, NonContiguousInputsMatchContiguous) {
  Tensor x = test::random_tensor({6, 70}, 1);
  Tensor xt = transpose(x, 0, 1);             // (70, 6), strides (1, 70)
  Tensor xs = slice(x, 1, 1, 70, 3);          // (6, 23), stride 3
  Tensor y = test::random_tensor({70, 6}, 2);
  EXPECT_EQ((xt + y).to_floats(), (contiguous(xt) + y).to_floats());
  EXPECT_EQ((y * xt).to_floats(), (y * contiguous(xt)).to_floats());
  EXPECT_EQ(gelu(xs).to_floats(), gelu(contiguous(xs)).to_floats());
  EXPECT_EQ(sqrt(abs(xs)).to_floats(), sqrt(abs(contiguous(xs))).to_floats());
  EXPECT_EQ(sum(xt, 0).to_floats(), sum(contiguous(xt), 0).to_floats());
  EXPECT_EQ(max(xs, 1).to_floats(), max(contiguous(xs), 1).to_floats());
}

TEST(OpsArith, GradcheckBinaryWithBroadcasting) {
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{2, 3, 4}, {4}}, {{2, 1, 4}, {1, 3, 1}}, {{3, 4}, {3, 4}}, {{1}, {2, 3}}};
  for (const auto& [sa, sb] : cases) {
    const std::string what = shape_str(sa) + shape_str(sb);
    EXPECT_TRUE(test::gradcheck([](const std::vector<Tensor>& v) { return v[0] + v[1]; },
                                {test::random_tensor(sa, 1), test::random_tensor(sb, 2)}, 1e-2, 1e-2, 1e-3, "add" + what));
    EXPECT_TRUE(test::gradcheck([](const std::vector<Tensor>& v) { return v[0] - v[1]; },
                                {test::random_tensor(sa, 1), test::random_tensor(sb, 2)}, 1e-2, 1e-2, 1e-3, "sub" + what));
    EXPECT_TRUE(test::gradcheck([](const std::vector<Tensor>& v) { return v[0] * v[1]; },
                                {test::random_tensor(sa, 1), test::random_tensor(sb, 2)}, 1e-2, 1e-2, 1e-3, "mul" + what));
    EXPECT_TRUE(test::gradcheck([](const std::vector<Tensor>& v) { return v[0] / v[1]; },
                                {test::random_tensor(sa, 1), positive(sb, 2)}, 1e-3, 1e-2, 1e-3, "div" + what));
  }
}

TEST(OpsArith, GradcheckSameTensorBothOperands) {
  EXPECT_TRUE(test::gradcheck([](const std::vector<Tensor>& v) { return v[0] * v[0]; }, {test::random_tensor({5}, 3)},
                              1e-2, 1e-2, 1e-3, "x*x"));
}

TEST(OpsArith, GradcheckScalarAndUnaryMaps) {
  const std::vector<std::pair<std::string, Fn>> ops = {
      {"add_scalar", [](const std::vector<Tensor>& v) { return add_scalar(v[0], 0.7f); }},
      {"mul_scalar", [](const std::vector<Tensor>& v) { return mul_scalar(v[0], -1.3f); }},
      {"div_scalar", [](const std::vector<Tensor>& v) { return v[0] / 3.0f; }},
      {"rsub_scalar", [](const std::vector<Tensor>& v) { return 2.0f - v[0]; }},
      {"neg", [](const std::vector<Tensor>& v) { return -v[0]; }},
      {"sqrt", [](const std::vector<Tensor>& v) { return sqrt(v[0]); }},
      {"rsqrt", [](const std::vector<Tensor>& v) { return rsqrt(v[0]); }},
      {"pow2", [](const std::vector<Tensor>& v) { return pow(v[0], 2.0f); }},
      {"pow1.5", [](const std::vector<Tensor>& v) { return pow(v[0], 1.5f); }},
      {"pow-0.5", [](const std::vector<Tensor>& v) { return pow(v[0], -0.5f); }},
      {"abs", [](const std::vector<Tensor>& v) { return abs(v[0] - 1.2f); }},
      {"exp", [](const std::vector<Tensor>& v) { return exp(v[0]); }},
      {"log", [](const std::vector<Tensor>& v) { return log(v[0]); }},
  };
  for (const auto& [name, fn] : ops)
    EXPECT_TRUE(test::gradcheck(fn, {positive({3, 5}, 4)}, 1e-3, 1e-2, 1e-3, name)) << name;
}

TEST(OpsActivation, GradcheckActivations) {
  const std::vector<std::pair<std::string, Fn>> ops = {
      {"relu", [](const std::vector<Tensor>& v) { return relu(v[0]); }},
      {"gelu", [](const std::vector<Tensor>& v) { return gelu(v[0]); }},
      {"gelu_tanh", [](const std::vector<Tensor>& v) { return gelu(v[0], GeluApprox::tanh); }},
      {"silu", [](const std::vector<Tensor>& v) { return silu(v[0]); }},
      {"sigmoid", [](const std::vector<Tensor>& v) { return sigmoid(v[0]); }},
      {"tanh", [](const std::vector<Tensor>& v) { return tanh(v[0]); }},
  };
  // Values away from relu's kink at 0 (a finite difference across it is meaningless).
  Tensor x = Tensor::from_floats({-3.1f, -1.7f, -0.6f, -0.2f, 0.3f, 0.8f, 1.4f, 2.6f, 4.2f, -5.0f}, {2, 5});
  for (const auto& [name, fn] : ops) EXPECT_TRUE(test::gradcheck(fn, {x}, 1e-3, 1e-2, 1e-3, name)) << name;
}

TEST(OpsActivation, KnownValues) {
  Tensor x = Tensor::from_floats({-1.0f, 0.0f, 2.0f}, {3});
  test::expect_close(gelu(x), Tensor::from_floats({-0.15865525f, 0.0f, 1.9544997f}, {3}), 1e-6, 1e-7, "gelu");
  test::expect_close(relu(x), Tensor::from_floats({0, 0, 2}, {3}), 0, 0, "relu");
  test::expect_close(sigmoid(x), Tensor::from_floats({0.26894142f, 0.5f, 0.88079708f}, {3}), 1e-6, 0, "sigmoid");
}

TEST(OpsMask, MaskedFillAndWhere) {
  Tensor x = Tensor::from_floats({1, 2, 3, 4, 5, 6}, {2, 3});
  Tensor causal = Tensor::from_ints({0, 1, 0}, {1, 3}, DType::u8);
  EXPECT_EQ(masked_fill(x, causal, -1e9f).to_floats(), (std::vector<float>{1, -1e9f, 3, 4, -1e9f, 6}));
  Tensor m = Tensor::from_ints({1, 0}, {2, 1}, DType::u8);
  Tensor w = where(m, x, Tensor::from_floats({-7}, {1}));
  EXPECT_EQ(w.to_floats(), (std::vector<float>{1, 2, 3, -7, -7, -7}));
  EXPECT_TRUE(test::gradcheck([causal](const std::vector<Tensor>& v) { return masked_fill(v[0], causal, 3.0f); },
                              {test::random_tensor({4, 3}, 5)}, 1e-2, 1e-3, 1e-3, "masked_fill"));
  Tensor m3 = Tensor::from_ints({1, 0, 0, 1, 1, 0}, {2, 1, 3}, DType::u8);
  EXPECT_TRUE(test::gradcheck([m3](const std::vector<Tensor>& v) { return where(m3, v[0], v[1]); },
                              {test::random_tensor({4, 1}, 6), test::random_tensor({3}, 7)}, 1e-2, 1e-3, 1e-3, "where"));
}

TEST(OpsReduce, ValuesAndKeepdim) {
  Tensor x = Tensor::from_floats({1, 5, 3, 4, 2, 6}, {2, 3});
  EXPECT_EQ(sum(x, 1).to_floats(), (std::vector<float>{9, 12}));
  EXPECT_EQ(sum(x, 0, true).shape(), (Shape{1, 3}));
  EXPECT_EQ(sum(x, 0, true).to_floats(), (std::vector<float>{5, 7, 9}));
  EXPECT_EQ(mean(x, -1).to_floats(), (std::vector<float>{3, 4}));
  EXPECT_EQ(max(x, 1).to_floats(), (std::vector<float>{5, 6}));
  EXPECT_EQ(max(x, 0).to_floats(), (std::vector<float>{4, 5, 6}));
  EXPECT_EQ(argmax(x, 1).to_ints(), (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(sum(x).item(), 21.0f);
  EXPECT_EQ(sum(x).dim(), 0);
  EXPECT_EQ(mean(x).item(), 3.5f);
  EXPECT_EQ(max(x).item(), 6.0f);
}

TEST(OpsReduce, GradcheckReductions) {
  const std::vector<std::pair<std::string, Fn>> ops = {
      {"sum0", [](const std::vector<Tensor>& v) { return sum(v[0], 0); }},
      {"sum1k", [](const std::vector<Tensor>& v) { return sum(v[0], 1, true); }},
      {"sum2", [](const std::vector<Tensor>& v) { return sum(v[0], -1); }},
      {"mean1", [](const std::vector<Tensor>& v) { return mean(v[0], 1); }},
      {"max1", [](const std::vector<Tensor>& v) { return max(v[0], 1); }},
      {"max2", [](const std::vector<Tensor>& v) { return max(v[0], 2, true); }},
      {"sum", [](const std::vector<Tensor>& v) { return sum(v[0]); }},
      {"mean", [](const std::vector<Tensor>& v) { return mean(v[0]); }},
      {"max", [](const std::vector<Tensor>& v) { return max(v[0]); }},
  };
  for (const auto& [name, fn] : ops)
    EXPECT_TRUE(test::gradcheck(fn, {test::random_tensor({2, 3, 4}, 8)}, 1e-3, 1e-2, 1e-3, name)) << name;
}

TEST(OpsReduce, MaxOfAllSplitsGradientBetweenTies) {
  Tensor x = Tensor::from_floats({1, 3, 3, 2}, {4}).requires_grad_();
  backward(max(x));
  EXPECT_EQ(x.grad().to_floats(), (std::vector<float>{0, 0.5f, 0.5f, 0}));
}

TEST(OpsShape, SumToShapeMatchesNaiveSum) {
  Tensor g = test::random_tensor({3, 40, 50}, 9);
  const std::vector<Shape> targets = {{50}, {3, 1, 50}, {1, 40, 1}, {40, 1}, {3, 40, 1}, {1}, {3, 40, 50}};
  const auto gv = g.to_floats();
  for (const Shape& t : targets) {
    Tensor s = sum_to_shape(g, t);
    ASSERT_EQ(s.shape(), t);
    // Naive: add every element into its destination in double.
    const std::size_t td = t.size();
    std::vector<double> want(static_cast<std::size_t>(shape_numel(t)), 0.0);
    for (std::int64_t i = 0; i < 3; ++i)
      for (std::int64_t j = 0; j < 40; ++j)
        for (std::int64_t k = 0; k < 50; ++k) {
          const std::int64_t idx[3] = {i, j, k};
          std::int64_t dst = 0;
          for (std::size_t d = 0; d < td; ++d) {
            const std::int64_t gi = idx[3 - td + d];
            dst = dst * t[d] + (t[d] == 1 ? 0 : gi);
          }
          want[static_cast<std::size_t>(dst)] += gv[static_cast<std::size_t>((i * 40 + j) * 50 + k)];
        }
    const auto got = s.to_floats();
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4) << shape_str(t) << " [" << i << "]";
  }
}

TEST(OpsMath, ResultsIdenticalAcrossThreadCounts) {
  const int saved = num_threads();
  Tensor x = test::random_tensor({8, 300, 130}, 10);  // (B, T, C)
  Tensor b = test::random_tensor({130}, 11);          // (C)
  auto run = [&](int threads) {
    set_num_threads(threads);
    Tensor xg = x.clone().requires_grad_();
    Tensor bg = b.clone().requires_grad_();
    Tensor y = gelu(xg + bg) * silu(xg);     // (B, T, C)
    Tensor s1 = sum(y, 1);                   // (B, C)
    Tensor m2 = max(y, 2);                   // (B, T)
    Tensor s0 = sum(transpose(y, 0, 2), 2);  // (C, T): a non-contiguous reduction
    Tensor total = mean(s1) + sum(m2) + mean(s0);
    backward(total);
    return std::vector<Tensor>{y, s1, m2, s0, total, xg.grad(), bg.grad()};
  };
  const auto one = run(1), two = run(2);
  set_num_threads(saved);
  const char* names[] = {"y", "sum1", "max2", "sum_t", "total", "grad.x", "grad.b"};
  for (std::size_t i = 0; i < one.size(); ++i) test::expect_bitwise_equal(one[i], two[i], names[i]);
}

TEST(OpsErrors, MessagesNameTheOpAndShapes) {
  Tensor a = Tensor::zeros({2, 3}), b = Tensor::zeros({4});
  const std::string add_err = error_of([&] { add(a, b); });
  EXPECT_NE(add_err.find("[add]"), std::string::npos) << add_err;
  EXPECT_NE(add_err.find("(2,3)"), std::string::npos) << add_err;
  EXPECT_NE(add_err.find("(4)"), std::string::npos) << add_err;
  EXPECT_NE(error_of([&] { a * b; }).find("[mul]"), std::string::npos);
  EXPECT_NE(error_of([&] { a / b; }).find("[div]"), std::string::npos);
  EXPECT_NE(error_of([&] { a - b; }).find("[sub]"), std::string::npos);
  EXPECT_NE(error_of([&] { where(Tensor::zeros({3}, DType::u8), a, b); }).find("[where]"), std::string::npos);
  EXPECT_NE(error_of([&] { masked_fill(a, Tensor::zeros({3}), 0.0f); }).find("u8"), std::string::npos);
  EXPECT_NE(error_of([&] { masked_fill(a, Tensor::zeros({4, 2, 3}, DType::u8), 0.0f); }).find("[masked_fill]"),
            std::string::npos);
  EXPECT_NE(error_of([&] { gelu(Tensor::zeros({2}, DType::bf16)); }).find("[gelu] expects f32"), std::string::npos);
  EXPECT_NE(error_of([&] { sum(a, 2); }).find("[sum] dim 2 out of range"), std::string::npos);
  EXPECT_NE(error_of([&] { max(a, -3); }).find("[max]"), std::string::npos);
  EXPECT_NE(error_of([&] { max(Tensor::zeros({0})); }).find("[max]"), std::string::npos);
}
