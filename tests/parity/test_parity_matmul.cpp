// Parity with PyTorch for matmul and linear: forward and every gradient, with broadcast batch
// dims, 1-D operands and transposed (non-contiguous) operands (fixtures: ref_matmul.py).
#include <gtest/gtest.h>

#include "support/test_support.h"
#include "tfm/tfm.h"

using namespace tfm;

namespace {

constexpr double kRtol = 1e-5, kAtol = 1e-5;

// Leaves named `leaves` from the fixture; fn builds the output; checks y and grad.<leaf>.
void check_case(const std::string& name, const std::vector<std::string>& leaves,
                const std::function<Tensor(const std::vector<Tensor>&)>& fn) {
  const SafetensorsFile f = test::load_fixture(name);
  std::vector<Tensor> xs;
  for (const auto& l : leaves) xs.push_back(test::fixture_tensor(f, l).requires_grad_());
  Tensor y = fn(xs);
  test::expect_close(y, test::fixture_tensor(f, "y"), kRtol, kAtol, name + " y");
  backward(y, test::fixture_tensor(f, "g"));
  for (std::size_t i = 0; i < leaves.size(); ++i)
    test::expect_close(xs[i].grad(), test::fixture_tensor(f, "grad." + leaves[i]), kRtol, kAtol,
                       name + " grad." + leaves[i]);
}

}  // namespace

TEST(ParityMatmul, TwoD) {
  check_case("matmul_2d", {"a", "b"}, [](const auto& x) { return matmul(x[0], x[1]); });
}

TEST(ParityMatmul, BroadcastBatchDims) {
  check_case("matmul_bcast", {"a", "b"}, [](const auto& x) { return matmul(x[0], x[1]); });
}

TEST(ParityMatmul, TransposedOperandsAreReadInPlace) {
  check_case("matmul_trans", {"at", "bt"}, [](const auto& x) {
    Tensor a = transpose(x[0], -1, -2), b = transpose(x[1], 0, 1);
    EXPECT_FALSE(a.is_contiguous());
    EXPECT_FALSE(b.is_contiguous());
    return matmul(a, b);
  });
}

TEST(ParityMatmul, SharedRightHandSide) {
  check_case("matmul_shared_rhs", {"a", "b"}, [](const auto& x) { return matmul(x[0], x[1]); });
}

TEST(ParityMatmul, OneDimensionalOperands) {
  check_case("matmul_vecmat", {"a", "b"}, [](const auto& x) { return matmul(x[0], x[1]); });
  check_case("matmul_matvec", {"a", "b"}, [](const auto& x) { return matmul(x[0], x[1]); });
}

TEST(ParityLinear, WithBias) {
  check_case("linear_bias", {"x", "w", "b"}, [](const auto& x) { return linear(x[0], x[1], x[2]); });
}

TEST(ParityLinear, TransposedInputAndWeightWithoutBias) {
  check_case("linear_trans", {"xt", "wt"}, [](const auto& x) {
    return linear(transpose(x[0], 0, 1), transpose(x[1], 0, 1));
  });
}
