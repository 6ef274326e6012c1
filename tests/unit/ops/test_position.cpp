// Positional encodings: properties that hold whatever the reference.
#include <gtest/gtest.h>

#include <cmath>

#include "support/test_support.h"
#include "tfm/tfm.h"

using namespace tfm;

TEST(Position, RopePreservesNormsAndRelativeAngles) {
  // Rotations keep each pair's norm, and q·k depends only on the position difference.
  Tensor q = Tensor::randn({1, 16}, 1), k = Tensor::randn({1, 16}, 2);
  auto dot_at = [&](std::int64_t pq, std::int64_t pk, RopePairing p) {
    const auto a = rope(q, position_ids(1, pq), 10000.0, p).to_floats();
    const auto b = rope(k, position_ids(1, pk), 10000.0, p).to_floats();
    double s = 0;
    for (int i = 0; i < 16; ++i) s += static_cast<double>(a[i]) * b[i];
    return s;
  };
  for (RopePairing p : {RopePairing::halves, RopePairing::adjacent}) {
    EXPECT_NEAR(dot_at(3, 1, p), dot_at(103, 101, p), 1e-4);
    const auto r = rope(q, position_ids(1, 77), 10000.0, p).to_floats();
    const auto o = q.to_floats();
    double nr = 0, no = 0;
    for (int i = 0; i < 16; ++i) nr += r[i] * r[i], no += o[i] * o[i];
    EXPECT_NEAR(nr, no, 1e-4);
  }
}

TEST(Position, RopeGradcheckAndNonContiguousInput) {
  const Tensor pos = position_ids(5, 3);
  for (RopePairing p : {RopePairing::halves, RopePairing::adjacent}) {
    EXPECT_TRUE(test::gradcheck([&](const std::vector<Tensor>& in) { return rope(in[0], pos, 100.0, p); },
                                {test::random_tensor({2, 5, 8}, 3)}, 1e-2, 1e-3, 1e-3, "rope"));
    // A transposed (non-contiguous) view gives the same result as its contiguous copy.
    const Tensor x = transpose(test::random_tensor({5, 2, 8}, 4), 0, 1);  // (2,5,8) view
    test::expect_bitwise_equal(rope(x, pos, 100.0, p), rope(contiguous(x), pos, 100.0, p), "view");
  }
}

TEST(Position, SinusoidalFirstRowAndErrors) {
  const auto t = sinusoidal_positions(2, 4).to_floats();
  EXPECT_EQ(t[0], 0.0f);  // sin(0)
  EXPECT_EQ(t[1], 1.0f);  // cos(0)
  EXPECT_NEAR(t[4], std::sin(1.0), 1e-7);
  EXPECT_NEAR(t[6], std::sin(1.0 / 100.0), 1e-7);  // 10000^(2/4) = 100
  EXPECT_THROW(sinusoidal_positions(4, 3), Error);
  EXPECT_THROW(rope(Tensor::zeros({2, 3}), position_ids(2), 1e4, RopePairing::halves), Error);  // odd D / T mismatch
}

TEST(Position, T5BucketsAreSymmetricInRangeAndCausalIgnoresTheFuture) {
  const auto b = t5_relative_buckets(1, 400, true, 32, 128, 200).to_ints();  // rel = j - 200
  for (std::int64_t v : b) EXPECT_TRUE(v >= 0 && v < 32);
  const auto c = t5_relative_buckets(1, 10, false, 32, 128, 4).to_ints();
  for (int j = 5; j < 10; ++j) EXPECT_EQ(c[static_cast<std::size_t>(j)], 0) << j;  // future keys share bucket 0
}
