// Parity with PyTorch references for sinusoidal tables, RoPE (both pairings), T5 buckets.
#include <gtest/gtest.h>

#include "support/test_support.h"
#include "tfm/tfm.h"

using namespace tfm;

TEST(ParityPosition, SinusoidalTableMatchesD2l) {
  const SafetensorsFile f = test::load_fixture("pos_sinusoidal");
  test::expect_close(sinusoidal_positions(50, 32), test::fixture_tensor(f, "table"), 1e-5, 2e-6, "table");
}

TEST(ParityPosition, RopeBothPairingsForwardAndBackward) {
  for (const auto& [name, pairing] : {std::pair{"halves", RopePairing::halves}, {"adjacent", RopePairing::adjacent}}) {
    const SafetensorsFile f = test::load_fixture(std::string("pos_rope_") + name);
    Tensor x = test::fixture_tensor(f, "x").requires_grad_();
    Tensor y = rope(x, test::fixture_tensor(f, "pos"), 10000.0, pairing);
    test::expect_close(y, test::fixture_tensor(f, "y"), 1e-5, 1e-6, std::string(name) + " y");
    backward(y, test::fixture_tensor(f, "w"));
    test::expect_close(x.grad(), test::fixture_tensor(f, "grad.x"), 1e-5, 1e-6, std::string(name) + " grad.x");
  }
}

TEST(ParityPosition, T5BucketsMatchTheReference) {
  const SafetensorsFile f = test::load_fixture("pos_t5_buckets");
  EXPECT_EQ(t5_relative_buckets(40, 300, true, 32, 128).to_ints(), test::fixture_tensor(f, "bidirectional").to_ints());
  EXPECT_EQ(t5_relative_buckets(40, 300, false, 32, 128).to_ints(), test::fixture_tensor(f, "causal").to_ints());
}
