// A CLIP hub directory (tools/reference/ref_clip.py writes it with torch from modeling_clip's
// forward, towers of different widths, position_ids buffers stored): both towers' normalised
// embeddings, logits_per_image and every parameter's gradient through them; the vision tower
// on a larger patch grid (positions resized); the legacy end-token rule (eos_token_id 2: the
// largest id); the config's round trip; wrong inputs named.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "support/test_support.h"
#include "tfm/tfm.h"

using namespace tfm;

namespace {

std::string hub_dir(const std::string& name) {
  const char* d = std::getenv("TFM_FIXTURE_DIR");
  return std::string(d ? d : "fixtures") + "/hub/" + name;
}

Tensor unit_rows(const Tensor& x) { return div(x, sqrt(sum(mul(x, x), -1, true))); }

}  // namespace

TEST(ClipParity, EmbeddingsLogitsAndEveryGradient) {
  LoadedWeights w = load_model_weights(hub_dir("clip"));
  const SafetensorsFile r = load_safetensors(hub_dir("clip") + ".ref.safetensors");
  EXPECT_EQ(w.config.model_type, "clip");
  EXPECT_EQ(w.config.d_model, 24);
  EXPECT_EQ(w.config.text_tower.d_model, 16);
  EXPECT_EQ(w.config.text_tower.projection_dim, 8);
  EXPECT_EQ(w.config.activation, FfnActivation::quick_gelu);
  ModelInputs in;
  in.pixel_values = r.tensors.at("pixel_values");
  in.input_ids = r.tensors.at("input_ids");
  in.valid_lens = r.tensors.at("valid_lens");
  for (auto& [name, p] : w.model.parameters()) p.requires_grad_();
  const ModelOutputs out = w.model.forward(in);
  test::expect_close(out.image_embeds, r.tensors.at("image_embeds"), 1e-4, 1e-4, "image_embeds");
  test::expect_close(out.text_embeds, r.tensors.at("text_embeds"), 1e-4, 1e-4, "text_embeds");
  test::expect_close(out.logits, r.tensors.at("logits_per_image"), 1e-4, 1e-4, "logits_per_image");
  EXPECT_NEAR(w.model.logit_scale(), std::exp(2.6592), 1e-4);
  backward(out.logits, r.tensors.at("w"));
  for (const auto& [name, p] : w.model.parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    test::expect_close(p.grad(), r.tensors.at("grad." + name), 1e-4, 2e-5, "grad " + name);
  }
}

TEST(ClipParity, EachTowerAloneAndLargerPictures) {
  LoadedWeights w = load_model_weights(hub_dir("clip"));
  const SafetensorsFile r = load_safetensors(hub_dir("clip") + ".ref.safetensors");
  NoGradGuard no_grad;
  // The features without normalisation, normalised here, equal forward()'s embeddings.
  test::expect_close(unit_rows(w.model.image_features(r.tensors.at("pixel_values"))), r.tensors.at("image_embeds"), 1e-4,
                     1e-4, "image_features");
  test::expect_close(unit_rows(w.model.text_features(r.tensors.at("input_ids"), r.tensors.at("valid_lens"))),
                     r.tensors.at("text_embeds"), 1e-4, 1e-4, "text_features");
  // Texts alone: no logits, the text embeddings only.
  ModelInputs texts;
  texts.input_ids = r.tensors.at("input_ids");
  texts.valid_lens = r.tensors.at("valid_lens");
  const ModelOutputs t = w.model.forward(texts);
  EXPECT_FALSE(t.logits.defined());
  EXPECT_FALSE(t.image_embeds.defined());
  test::expect_close(t.text_embeds, r.tensors.at("text_embeds"), 1e-4, 1e-4, "texts alone");
  // 16 x 16 pixels: a 4 x 4 grid on a table learnt for 3 x 3, resized bicubically.
  ModelInputs big;
  big.pixel_values = r.tensors.at("big_pixel_values");
  test::expect_close(w.model.forward(big).image_embeds, r.tensors.at("big_image_embeds"), 1e-4, 1e-4, "16 x 16");
}

TEST(ClipParity, LegacyConfigsPoolTheLargestId) {
  // text_config eos_token_id 2 (files from before the key was right): the largest id is pooled.
  const std::string dir = hub_dir("clip");
  std::string text = read_file(dir + "/config.json");
  const std::string key = "\"eos_token_id\": 39";
  const auto at = text.find(key);
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, key.size(), "\"eos_token_id\": 2");
  const ModelConfig legacy = parse_model_config(text, "legacy");
  EXPECT_EQ(legacy.text_tower.eos_token_id, 2);
  LoadedWeights w = load_model_weights(dir);
  Model m = Model::from_parameters(legacy, w.model.parameters());
  const SafetensorsFile r = load_safetensors(dir + ".ref.safetensors");
  NoGradGuard no_grad;
  test::expect_close(unit_rows(m.text_features(r.tensors.at("input_ids"), r.tensors.at("valid_lens"))),
                     r.tensors.at("legacy_text_embeds"), 1e-4, 1e-4, "legacy end token");
}

TEST(ClipParity, ConfigRoundTripsWithNestedTowers) {
  const ModelConfig c = load_model_weights(hub_dir("clip")).config;
  const std::string text = model_config_to_json(c);
  EXPECT_NE(text.find("\"text_config\""), std::string::npos) << text;
  EXPECT_NE(text.find("\"vision_config\""), std::string::npos) << text;
  const ModelConfig back = parse_model_config(text, "round trip");
  EXPECT_EQ(back.text_tower.d_model, 16);
  EXPECT_EQ(back.text_tower.vocab_size, 40);
  EXPECT_EQ(back.text_tower.eos_token_id, 39);
  EXPECT_EQ(back.d_model, 24);
  EXPECT_EQ(back.patch_size, 4);
  EXPECT_EQ(model_config_to_json(back), text);
  EXPECT_EQ(parameter_specs(back).size(), parameter_specs(c).size());
}

TEST(ClipParity, WrongInputsAreNamed) {
  LoadedWeights w = load_model_weights(hub_dir("clip"));
  const auto message = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&] { w.model.forward(ModelInputs{}); }).find("reads pixel_values, input_ids or both"), std::string::npos);
  EXPECT_NE(message([&] { w.model.text_features(Tensor::zeros({1, 13}, DType::i64)); })
                .find("a text of 13 tokens does not fit the text tower's 12 positions"),
            std::string::npos);
  EXPECT_NE(message([&] { w.model.text_features(Tensor::from_ints({40, 40, 40}, {1, 3})); }).find("40"),
            std::string::npos);
  EXPECT_NE(message([&] {
              parse_model_config(R"({"model_type": "clip", "text_config": {"hidden_sise": 8}})", "cfg");
            }).find("unknown key 'hidden_sise' for CLIP's text_config (did you mean 'hidden_size'?)"),
            std::string::npos);
  // A ViT is not a contrastive model.
  Model vit = Model::create(parse_model_config(R"({"model_type": "vit", "image_size": 8, "patch_size": 4, "hidden_size": 8,
      "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 16})", "vit"), 1);
  EXPECT_NE(message([&] { vit.text_features(Tensor::zeros({1, 3}, DType::i64)); }).find("needs a contrastive image-text model"),
            std::string::npos);
}
