// ViT and DeiT hub directories (tools/reference/ref_vit.py writes them with torch from
// modeling_vit's and modeling_deit's forward): the classifiers' logits and every gradient, at the
// native size and on a larger patch grid (positions resized as interpolate_pos_encoding does),
// the base models' last hidden states, loaded as published (prefixed names; unprefixed names
// with the pooler); the engine's sin-cos / mean-pooling ViT against the same computation.
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

// The classifier's logits and every parameter's gradient of sum(logits * w) on the pixels the
// reference file holds under `tag` ("" or "big_").
void expect_classifier_matches(const std::string& dir, const std::string& tag) {
  LoadedWeights w = load_model_weights(hub_dir(dir));
  const SafetensorsFile r = load_safetensors(hub_dir(dir) + ".ref.safetensors");
  ModelInputs in;
  in.pixel_values = r.tensors.at(tag + "pixel_values");
  for (auto& [name, p] : w.model.parameters()) p.requires_grad_();
  const ModelOutputs out = w.model.forward(in);
  test::expect_close(out.logits, r.tensors.at(tag + "logits"), 1e-4, 1e-4, dir + " " + tag + "logits");
  if (r.tensors.count(tag + "cls_logits")) {
    test::expect_close(out.cls_logits, r.tensors.at(tag + "cls_logits"), 1e-4, 1e-4, dir + " cls_logits");
    test::expect_close(out.distillation_logits, r.tensors.at(tag + "distillation_logits"), 1e-4, 1e-4,
                       dir + " distillation_logits");
  }
  backward(out.logits, r.tensors.at(tag + "w"));
  for (const auto& [name, p] : w.model.parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    test::expect_close(p.grad(), r.tensors.at(tag + "grad." + name), 1e-4, 2e-5, dir + " " + tag + "grad " + name);
  }
}

// A base model (head none, unprefixed names with the pooler) gives the last hidden state.
void expect_base_model_matches(const std::string& dir) {
  LoadedWeights w = load_model_weights(hub_dir(dir));
  const SafetensorsFile r = load_safetensors(hub_dir(dir) + ".ref.safetensors");
  EXPECT_EQ(w.config.head, HeadKind::none);
  ModelInputs in;
  in.pixel_values = r.tensors.at("pixel_values");
  test::expect_close(w.model.forward(in).logits, r.tensors.at("hidden"), 1e-4, 1e-4, dir + " hidden");
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

TEST(VitParity, BaseModelHiddenStates) { expect_base_model_matches("vit_model"); }

TEST(VitParity, LargerPicturesResizeThePositionTable) {
  // 16 x 16 pixels make a 4 x 4 grid; the table was learnt for 3 x 3. The gradient reaches the
  // table through the bicubic resize.
  expect_classifier_matches("vit_cls", "big_");
}

TEST(VitParity, SinCosPositionsWithoutClsTokenPoolTheMeanPatch) {
  LoadedWeights w = load_model_weights(hub_dir("vit_sincos"));
  EXPECT_EQ(w.config.position, PositionKind::sincos_2d);
  EXPECT_FALSE(w.config.cls_token);
  EXPECT_EQ(w.config.pooling, Pooling::mean);
  EXPECT_EQ(w.config.image_tokens(), 9);
  expect_classifier_matches("vit_sincos", "");
  expect_classifier_matches("vit_sincos", "big_");
  // The extension keys survive a round trip; a plain ViT's config.json stays without them.
  const std::string text = model_config_to_json(w.config);
  EXPECT_NE(text.find("\"position_embedding_type\": \"sincos_2d\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"use_cls_token\": false"), std::string::npos) << text;
  const std::string plain = model_config_to_json(load_model_weights(hub_dir("vit_cls")).config);
  EXPECT_EQ(plain.find("use_cls_token"), std::string::npos) << plain;
  EXPECT_EQ(plain.find("position_embedding_type"), std::string::npos) << plain;
}

TEST(DeitParity, DistilledClassifierBothHeadsAndGradients) {
  LoadedWeights w = load_model_weights(hub_dir("deit_teacher"));
  EXPECT_EQ(w.config.model_type, "deit");
  EXPECT_TRUE(w.config.distillation_token);
  EXPECT_TRUE(w.config.distillation_head);
  EXPECT_EQ(w.config.image_tokens(), 11);
  expect_classifier_matches("deit_teacher", "");
  expect_classifier_matches("deit_teacher", "big_");
  const ModelConfig back = parse_model_config(model_config_to_json(w.config), "round trip");
  EXPECT_TRUE(back.distillation_head);
}

TEST(DeitParity, BaseModelHiddenStates) { expect_base_model_matches("deit_model"); }

TEST(VitParity, PixelValuesOfTheWrongShapeAreNamed) {
  LoadedWeights w = load_model_weights(hub_dir("vit_cls"));
  for (const Shape& bad : {Shape{1, 1, 12, 12}, Shape{1, 3, 2, 12}}) {
    ModelInputs in;
    in.pixel_values = Tensor::zeros(bad);
    try {
      w.model.forward(in);
      FAIL() << "no error for " << shape_str(bad);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("do not fit the model's 3-channel images of 4 x 4 patches"), std::string::npos)
          << e.what();
    }
  }
}
