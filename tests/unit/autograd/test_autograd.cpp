// Autograd tape: recording, no-grad mode, accumulation into leaves, view backward rules.
#include <gtest/gtest.h>

#include "support/test_support.h"
#include "tfm/tfm.h"

using namespace tfm;

TEST(Autograd, NoGradRecordsNothing) {
  autograd::clear_tape();
  Tensor w = Tensor::randn({2, 3}, 1).requires_grad_();
  {
    NoGradGuard ng;
    Tensor y = transpose(w, 0, 1);
    EXPECT_FALSE(y.requires_grad());
  }
  EXPECT_EQ(autograd::tape_size(), 0u);
  Tensor y = transpose(w, 0, 1);
  EXPECT_TRUE(y.requires_grad());
  EXPECT_EQ(autograd::tape_size(), 1u);
  autograd::clear_tape();
}

TEST(Autograd, GradientsAccumulateUntilZeroGrad) {
  Tensor w = Tensor::randn({2, 3}, 1).requires_grad_();
  backward(reshape(w, {6}));
  backward(reshape(w, {3, 2}));
  for (float g : w.grad().to_floats()) EXPECT_EQ(g, 2.0f);
  w.zero_grad();
  EXPECT_FALSE(w.grad().defined());
}

TEST(Autograd, BackwardOfNonGradTensorIsAnError) {
  EXPECT_THROW(backward(Tensor::zeros({2})), Error);
}

TEST(Autograd, ViewBackwardRules) {
  Tensor x = Tensor::from_floats({0, 1, 2, 3, 4, 5}, {2, 3}).requires_grad_();
  // d/dx of sum(w * slice(expand(...)))
  Tensor s = slice(x, 1, 1, 3);  // (2,2)
  backward(s, Tensor::from_floats({1, 2, 3, 4}, {2, 2}));
  EXPECT_EQ(x.grad().to_floats(), (std::vector<float>{0, 1, 2, 0, 3, 4}));
  x.zero_grad();
  Tensor e = expand(reshape(x, {2, 1, 3}), {2, 4, 3});
  backward(e);
  for (float g : x.grad().to_floats()) EXPECT_EQ(g, 4.0f);
  x.zero_grad();
  backward(permute(x, {1, 0}), Tensor::from_floats({1, 2, 3, 4, 5, 6}, {3, 2}));
  EXPECT_EQ(x.grad().to_floats(), (std::vector<float>{1, 3, 5, 2, 4, 6}));
}

TEST(Autograd, CastBackwardReturnsF32Gradient) {
  Tensor x = Tensor::randn({5}, 2).requires_grad_();
  backward(cast(x, DType::bf16));
  EXPECT_EQ(x.grad().dtype(), DType::f32);
  for (float g : x.grad().to_floats()) EXPECT_EQ(g, 1.0f);
}

TEST(Autograd, GradcheckOfViews) {
  auto fn = [](const std::vector<Tensor>& in) {
    return contiguous(slice(transpose(expand(in[0], {4, 3, 5}), 0, 2), 1, 0, 3, 2));
  };
  EXPECT_TRUE(test::gradcheck(fn, {test::random_tensor({3, 1}, 9)}, 1e-2, 1e-3, 1e-3, "views"));
}

// A pipeline schedule's tapes: two graphs recorded apart, their backward passes run in either
// order, each walking its own graph only (what 1F1B does with its micro-batches in flight).
TEST(Autograd, GraphsOnTapesOfTheirOwnRunBackwardApart) {
  Tensor w = Tensor::randn({3, 3}, 1).requires_grad_();
  const Tensor x1 = Tensor::randn({2, 3}, 2), x2 = Tensor::randn({2, 3}, 3);
  // What each graph alone gives.
  backward(sum(mul(matmul(x1, w), matmul(x1, w))));
  const std::vector<float> g1 = w.grad().to_floats();
  w.zero_grad();
  backward(sum(matmul(x2, w)));
  const std::vector<float> g2 = w.grad().to_floats();
  w.zero_grad();

  autograd::Tape t1, t2;
  Tensor y1, y2;
  {
    autograd::TapeScope s(t1);
    y1 = sum(mul(matmul(x1, w), matmul(x1, w)));
  }
  {
    autograd::TapeScope s(t2);
    y2 = sum(matmul(x2, w));
  }
  EXPECT_GT(t1.size(), t2.size());
  EXPECT_EQ(autograd::tape_size(), 0u) << "nothing recorded onto the thread's own tape";
  {
    autograd::TapeScope s(t2);
    backward(y2);
  }
  EXPECT_EQ(t2.size(), 0u);
  EXPECT_EQ(w.grad().to_floats(), g2);
  w.zero_grad();
  {
    autograd::TapeScope s(t1);
    backward(y1);
  }
  EXPECT_EQ(w.grad().to_floats(), g1);
}
