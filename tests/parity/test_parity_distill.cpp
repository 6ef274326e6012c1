// Distillation's loss against PyTorch (tools/reference/ref_distill.py): the temperature-scaled
// KL with padding rows masked out, the hard loss with label smoothing, the hidden-state MSE
// through the projection over valid positions, their mix, and the gradients of the mix with
// respect to the student's logits, its hidden states and the projection.
#include <gtest/gtest.h>

#include "support/test_support.h"
#include "tfm/tfm.h"
#include "train/distill.h"

using namespace tfm;
using namespace tfm::train_detail;

TEST(ParityDistill, LossTermsMixAndGradientsMatchTorch) {
  const SafetensorsFile f = test::load_fixture("distill_loss");
  auto get = [&](const char* k) { return test::fixture_tensor(f, k); };
  DistillConfig cfg;
  cfg.temperature = std::stod(f.metadata.at("temperature"));
  cfg.alpha = std::stod(f.metadata.at("alpha"));
  cfg.hidden_weight = std::stod(f.metadata.at("hidden_weight"));
  const auto eps = static_cast<float>(std::stod(f.metadata.at("label_smoothing")));

  Tensor student = get("student").clone().requires_grad_();
  Tensor h_student = get("h_student").clone().requires_grad_();
  Tensor proj = get("proj").clone().requires_grad_();
  const Tensor soft = soft_target_loss(student, get("teacher"), get("counted"), cfg.temperature);
  const Tensor hard = cross_entropy(student, get("targets"), -100, eps);
  const Tensor hidden = hidden_mse(h_student, proj, get("h_teacher"), get("mask"));
  test::expect_close(reshape(soft, {1}), get("soft"), 1e-5, 1e-6, "soft term");
  test::expect_close(reshape(hard, {1}), get("hard"), 1e-5, 1e-6, "hard term");
  test::expect_close(reshape(hidden, {1}), get("hidden"), 1e-5, 1e-6, "hidden term");
  const Tensor total = mix_distill_loss(cfg, soft, hard, {hidden});
  test::expect_close(reshape(total, {1}), get("total"), 1e-5, 1e-6, "mixed loss");
  backward(total);
  test::expect_close(student.grad(), get("grad_student"), 1e-4, 1e-6, "d loss / d student logits");
  test::expect_close(h_student.grad(), get("grad_h_student"), 1e-4, 1e-6, "d loss / d student hidden");
  test::expect_close(proj.grad(), get("grad_proj"), 1e-4, 1e-6, "d loss / d projection");
  // Padding rows get no gradient from either term.
  const auto g = student.grad().to_floats();
  const auto counted = get("counted").to_floats();
  const std::int64_t V = student.size(1);
  for (std::int64_t r = 0; r < student.size(0); ++r) {
    if (counted[static_cast<std::size_t>(r)] != 0.0f) continue;
    for (std::int64_t v = 0; v < V; ++v) {
      EXPECT_EQ(g[static_cast<std::size_t>(r * V + v)], 0.0f) << "row " << r;
    }
  }
}

TEST(ParityDistill, TemperatureOneAndEqualLogitsGiveZero) {
  const SafetensorsFile f = test::load_fixture("distill_loss");
  const Tensor t = test::fixture_tensor(f, "teacher");
  const Tensor ones = Tensor::ones({t.size(0)});
  Tensor s = t.clone().requires_grad_();
  const Tensor kl = soft_target_loss(s, t, ones, 1.0);
  EXPECT_NEAR(kl.item(), 0.0f, 1e-6);
  backward(kl);
  for (float v : s.grad().to_floats()) EXPECT_NEAR(v, 0.0f, 1e-6);
}
