// Activation checkpointing: each layer recomputed in the backward pass gives the very same
// gradients (bit for bit, dropout on) as the plain backward, for every architecture family,
// and keeps less alive between the forward and the backward pass.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <optional>

#include "support/test_support.h"
#include "tfm/memory_plan.h"
#include "tfm/tfm.h"

using namespace tfm;

namespace {

ModelConfig family_config(Architecture arch) {
  ModelConfig c;
  c.architecture = arch;
  c.vocab_size = 41; c.d_model = 32; c.n_heads = 4; c.n_layers = 3; c.n_decoder_layers = 2; c.d_ff = 48;
  c.max_positions = 32;
  c.dropout = c.attention_dropout = c.embedding_dropout = 0.1;
  c.stochastic_depth = 0.3;  // its per-sequence masks must be replayed too
  if (arch == Architecture::decoder_only) {  // Llama-style: RMSNorm, SwiGLU, RoPE, GQA
    c.n_kv_heads = 2;
    c.norm = NormKind::rms_norm;
    c.activation = FfnActivation::swiglu;
    c.position = PositionKind::rope;
    c.bias = false;
  } else if (arch == Architecture::encoder_only) {  // BERT-style: post-norm, classifier head
    c.norm_placement = NormPlacement::post;
    c.head = HeadKind::classifier;
    c.num_labels = 3;
    c.type_vocab_size = 2;
    c.embedding_norm = true;
  } else {  // T5-style relative bias shared by the layers, plus cross-attention
    c.position = PositionKind::t5_relative;
    c.norm = NormKind::rms_norm;
    c.activation = FfnActivation::geglu;
  }
  return c;
}

ModelInputs inputs(Architecture arch) {
  ModelInputs in;
  std::vector<std::int64_t> src, tgt;
  for (int i = 0; i < 3 * 13; ++i) src.push_back((i * 5 + 1) % 41);
  for (int i = 0; i < 3 * 9; ++i) tgt.push_back((i * 11 + 2) % 41);
  in.input_ids = Tensor::from_ints(src, {3, 13}, DType::i64);
  in.valid_lens = Tensor::from_ints({13, 7, 2}, {3}, DType::i64);
  if (arch == Architecture::encoder_decoder) {
    in.decoder_input_ids = Tensor::from_ints(tgt, {3, 9}, DType::i64);
    in.decoder_valid_lens = Tensor::from_ints({9, 4, 9}, {3}, DType::i64);
  }
  return in;
}

// A scalar that depends on every logit unevenly, so every gradient path is exercised.
Tensor loss_of(const Tensor& logits) {
  std::vector<float> w(static_cast<std::size_t>(logits.numel()));
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = 0.5f * std::sin(static_cast<float>(i));
  return sum(mul(reshape(logits, {logits.numel()}), Tensor::from_floats(w, {logits.numel()})));
}

struct Step {
  double loss = 0;
  std::map<std::string, Tensor> grads;
  std::size_t live_after_forward = 0;  // bytes held between the forward and the backward pass
};

Step train_step(Model& m, const ModelInputs& in, bool checkpointed) {
  for (auto& [name, p] : m.parameters()) p.zero_grad();
  m.set_checkpoint_activations(checkpointed);
  m.set_dropout_seed(7, 3);
  const std::size_t before = memory_stats().current_bytes;
  Step s;
  {
    const Tensor loss = loss_of(m.forward(in).logits);
    s.live_after_forward = memory_stats().current_bytes - before;
    s.loss = loss.item();
    backward(loss);
  }
  for (auto& [name, p] : m.parameters()) s.grads[name] = p.grad().clone();
  return s;
}

// One training step of a fresh model of the family, without and with checkpointing.
class CheckpointActivations : public ::testing::TestWithParam<Architecture> {
 protected:
  void SetUp() override {
    model.emplace(Model::create(family_config(GetParam()), 5));
    for (auto& [name, p] : model->parameters()) p.requires_grad_(true);
    model->set_training(true);
    in = inputs(GetParam());
    plain = train_step(*model, in, false);
    ckpt = train_step(*model, in, true);
  }
  std::optional<Model> model;
  ModelInputs in;
  Step plain, ckpt;
};

}  // namespace

TEST_P(CheckpointActivations, GradientsAreBitIdenticalWithDropoutOn) {
  EXPECT_EQ(plain.loss, ckpt.loss);
  ASSERT_EQ(plain.grads.size(), ckpt.grads.size());
  for (const auto& [name, g] : plain.grads) {
    ASSERT_TRUE(g.defined()) << name;
    test::expect_bitwise_equal(ckpt.grads.at(name), g, "gradient of " + name);
  }
  // The point of it: the layers' activations are not kept between forward and backward.
  EXPECT_LT(ckpt.live_after_forward, plain.live_after_forward * 2 / 3)
      << "checkpointed " << ckpt.live_after_forward << " bytes, plain " << plain.live_after_forward;
}

// The memory planner's training figures (tfm info) against what the allocator holds.
TEST_P(CheckpointActivations, PlannerEstimatesWhatTheTapeKeeps) {
  const ActivationMemoryPlan plan = plan_activation_memory(model->config(), in.input_ids.size(1), in.input_ids.size(0));
  const auto near = [](std::int64_t estimate, std::size_t measured, const char* what) {
    const double rel = static_cast<double>(estimate) / static_cast<double>(measured);
    EXPECT_GT(rel, 0.8) << what << ": estimate " << estimate << ", measured " << measured;
    EXPECT_LT(rel, 1.25) << what << ": estimate " << estimate << ", measured " << measured;
  };
  near(plan.activation_bytes, plain.live_after_forward, "without checkpointing");
  near(plan.checkpoint_kept_bytes, ckpt.live_after_forward, "with checkpointing");
  EXPECT_LT(plan.checkpointed_bytes(), plan.activation_bytes);
}

INSTANTIATE_TEST_SUITE_P(Families, CheckpointActivations,
                         ::testing::Values(Architecture::decoder_only, Architecture::encoder_only,
                                           Architecture::encoder_decoder),
                         [](const auto& tp) { return std::string(to_string(tp.param)); });

TEST(CheckpointActivationsOp, NoRecordingOutsideGradModeAndRecomputeMustMatch) {
  Tensor w = Tensor::from_floats({0.5f, -1.0f, 2.0f}, {3}).requires_grad_();
  {
    NoGradGuard ng;
    const Tensor y = autograd::checkpoint("test", [&] { return mul(w, w); }, [&] { return mul(w, w); });
    EXPECT_FALSE(y.requires_grad());
    EXPECT_EQ(autograd::tape_size(), 0u);
  }
  // One entry for the whole checkpointed function, whatever it computes inside.
  const Tensor y = autograd::checkpoint("test", [&] { return mul(exp(w), w); }, [&] { return mul(exp(w), w); });
  EXPECT_EQ(autograd::tape_size(), 1u);
  backward(sum(y));
  const auto g = w.grad().to_floats();
  const float x[3] = {0.5f, -1.0f, 2.0f};
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(g[static_cast<std::size_t>(i)], std::exp(x[i]) * (x[i] + 1.0f), 1e-5);
  // A recomputation of another shape is an error naming the op, not a silent wrong gradient.
  w.zero_grad();
  const Tensor z = autograd::checkpoint("mismatch", [&] { return mul(w, w); }, [&] { return sum(w); });
  EXPECT_THROW(backward(sum(z)), Error);
  autograd::clear_tape();
}
