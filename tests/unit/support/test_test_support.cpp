// The comparison helpers the parity tests rely on must fail when they should: an infinity is
// matched only by the same infinity (its tolerance atol + rtol * inf would accept anything), a
// NaN only by a NaN.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <limits>

#include "support/test_support.h"
#include "tfm/tensor.h"

using namespace tfm;

namespace {
Tensor vec(std::vector<float> v) {
  const auto n = static_cast<std::int64_t>(v.size());
  return Tensor::from_floats(std::move(v), {n});
}
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
}  // namespace

TEST(TestSupport, ExpectCloseRejectsAFiniteValueWhereInfinityIsExpected) {
  EXPECT_NONFATAL_FAILURE(test::expect_close(vec({1.0f, 5.0f}), vec({1.0f, kInf}), 1e-3, 1e-3, "x"), "1 of 2");
  EXPECT_NONFATAL_FAILURE(test::expect_close(vec({-kInf}), vec({kInf}), 1e-3, 1e-3, "x"), "1 of 1");
  EXPECT_NONFATAL_FAILURE(test::expect_close(vec({kInf}), vec({3.0f}), 1e-3, 1e-3, "x"), "1 of 1");
  EXPECT_NONFATAL_FAILURE(test::expect_close(vec({kNaN}), vec({0.0f}), 1e-3, 1e-3, "x"), "1 of 1");
  EXPECT_NONFATAL_FAILURE(test::expect_close(vec({1.0f}), vec({kNaN}), 1e-3, 1e-3, "x"), "1 of 1");
}

TEST(TestSupport, ExpectCloseAcceptsEqualSpecialsAndValuesInsideTheTolerance) {
  EXPECT_TRUE(test::expect_close(vec({kInf, -kInf, kNaN, 1.0f}), vec({kInf, -kInf, kNaN, 1.0005f}), 1e-3, 0, "x"));
  EXPECT_NONFATAL_FAILURE(test::expect_close(vec({1.0f}), vec({1.01f}), 1e-3, 0, "x"), "1 of 1");
}
