// ViT hub directories (tools/reference/ref_vit.py writes them with torch from modeling_vit's
// forward): ViTForImageClassification's logits and every gradient, ViTModel's last hidden state on the same
// pixels, loaded as published (prefixed names; unprefixed names with the pooler).
#include <gtest/gtest.h>

#include <cstdlib>

#include "support/test_support.h"
#include "tfm/inspect.h"
#include "tfm/tfm.h"

using namespace tfm;

namespace {

std::string hub_dir(const std::string& name) {
  const char* d = std::getenv("TFM_FIXTURE_DIR");
  return std::string(d ? d : "fixtures") + "/hub/" + name;
}

}  // namespace

TEST(VitParity, ImageClassifierLogits) {
  LoadedWeights w = load_model_weights(hub_dir("vit_cls"));
  const SafetensorsFile r = load_safetensors(hub_dir("vit_cls") + ".ref.safetensors");
  EXPECT_EQ(w.config.model_type, "vit");
  EXPECT_EQ(w.config.id2label, (std::vector<std::string>{"cat", "dog", "bird"}));
  ModelInputs in;
  in.pixel_values = r.tensors.at("pixel_values");
  for (auto& [name, p] : w.model.parameters()) p.requires_grad_();
  const ModelOutputs out = w.model.forward(in);
  test::expect_close(out.logits, r.tensors.at("logits"), 1e-4, 1e-4, "vit_cls logits");
  // Every gradient, the patch kernel's through its reshape and the [CLS] token's through expand.
  backward(out.logits, r.tensors.at("w"));
  for (const auto& [name, p] : w.model.parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    test::expect_close(p.grad(), r.tensors.at("grad." + name), 1e-4, 2e-5, "vit_cls grad " + name);
  }
}

TEST(VitParity, AttentionRolloutOverThePatches) {
  LoadedWeights w = load_model_weights(hub_dir("vit_cls"));
  const SafetensorsFile r = load_safetensors(hub_dir("vit_cls") + ".ref.safetensors");
  const auto got = attention_rollout(w.model, r.tensors.at("pixel_values"));
  const std::vector<float> want = r.tensors.at("rollout").to_floats();  // (2, 9)
  ASSERT_EQ(got.size(), 2u);
  for (std::size_t b = 0; b < 2; ++b) {
    ASSERT_EQ(got[b].size(), 9u);
    for (std::size_t j = 0; j < 9; ++j) EXPECT_NEAR(got[b][j], want[b * 9 + j], 1e-5) << "image " << b << " patch " << j;
  }
}

TEST(VitParity, BaseModelHiddenStates) {
  LoadedWeights w = load_model_weights(hub_dir("vit_model"));
  const SafetensorsFile r = load_safetensors(hub_dir("vit_model") + ".ref.safetensors");
  EXPECT_EQ(w.config.head, HeadKind::none);
  ModelInputs in;
  in.pixel_values = r.tensors.at("pixel_values");
  test::expect_close(w.model.forward(in).logits, r.tensors.at("hidden"), 1e-4, 1e-4, "vit_model hidden");
}

TEST(VitParity, PixelValuesOfTheWrongShapeAreNamed) {
  LoadedWeights w = load_model_weights(hub_dir("vit_cls"));
  ModelInputs in;
  in.pixel_values = Tensor::zeros({1, 3, 16, 16});
  try {
    w.model.forward(in);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("do not match the model's 3 x 12 x 12 images"), std::string::npos) << e.what();
  }
}
