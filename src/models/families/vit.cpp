// ViT (Dosovitskiy et al. 2021; Hugging Face's ViTModel and ViTForImageClassification): an
// image cut into patch_size x patch_size patches, each a token through one convolution with
// stride = kernel, a learned [CLS] token first, learned positions, a pre-LayerNorm encoder with
// a final LayerNorm, and the classifier on the [CLS] token (ViTModel's pooler: dense + tanh).
// Engine extensions (keys Hugging Face's ViTConfig does not have, written only when set):
// "position_embedding_type": "sincos_2d" (MAE's fixed 2-D table instead of learned positions),
// "use_cls_token": false (no [CLS]; then "pooling": "mean", the patches' average, which
// Beyer et al. 2022's simple ViT uses). DeiT (deit.cpp) shares the encoder wiring below.
#include "models/families/families.h"
#include "tfm/error.h"

namespace tfm {
namespace {

using json = nlohmann::json;

ConfigSchema schema() {
  ConfigSchema s = vit_like_schema("vit");
  s.keys.push_back(architectures_key({{"ViTForImageClassification", HeadKind::classifier}, {"ViTModel", HeadKind::none}}));
  return s;
}

std::vector<ParamSpec> parameters(const ModelConfig& c) {
  std::vector<ParamSpec> s = vit_encoder_specs(c, "vit.");
  if (c.head == HeadKind::classifier) add_linear_spec(s, "classifier", c.num_labels, c.d_model, true);
  return s;
}

void wire(Layout& l, const ModelConfig& c, const WireParams& P) {
  wire_vit_encoder(l, c, P, "vit.");
  if (c.head == HeadKind::classifier) l.classifier = P.linear("classifier");
}

// ViTModel's pooler (add_pooling_layer), which the classifier does not use.
bool hub_drops(const ModelConfig&, const std::string& n) { return starts_with(n, "vit.pooler."); }

}  // namespace

void finish_image_config(ModelConfig& c, const json&, const std::string& w) {
  TFM_CHECK(c.image_size % c.patch_size == 0, w, "image_size ", c.image_size, " is not a multiple of patch_size ",
            c.patch_size);
  TFM_CHECK(c.position != PositionKind::sincos_2d || c.d_model % 4 == 0, w, "position_embedding_type 'sincos_2d' needs ",
            "hidden_size divisible by 4, got ", c.d_model);
  TFM_CHECK(c.cls_token || c.pooling == Pooling::mean || c.head == HeadKind::none, w,
            "without a [CLS] token (use_cls_token false) the classifier needs \"pooling\": \"mean\"");
  c.max_positions = c.image_tokens();  // the position table: [CLS] (and DeiT's distillation token), every patch
}

namespace {

// The engine's extension keys are written only when they differ from ViT's choice, so a
// config.json of a plain ViT stays Hugging Face's.
ConfigKey unless_default(ConfigKey k, json plain) {
  k.write = [w = k.write, plain](const ModelConfig& c) {
    json v = w(c);
    return v == plain ? json(json::value_t::discarded) : v;
  };
  return k;
}

}  // namespace

ConfigSchema vit_like_schema(const std::string& model_type) {
  ModelConfig b;
  b.model_type = model_type;
  b.architecture = Architecture::encoder_only;
  b.norm = NormKind::layer_norm;
  b.norm_placement = NormPlacement::pre;
  b.norm_eps = 1e-12;
  b.final_norm = true;
  b.position = PositionKind::learned;
  b.activation = FfnActivation::gelu;
  b.head = HeadKind::classifier;
  b.pooling = Pooling::first;
  b.tie_embeddings = false;
  b.dropout = b.embedding_dropout = b.attention_dropout = 0.0;
  // ViTConfig's defaults (ViT-B/16 at 224 x 224).
  b.d_model = 768; b.n_layers = 12; b.n_heads = 12; b.d_ff = 3072;
  b.image_size = 224; b.patch_size = 16; b.num_channels = 3;
  b.vocab_size = 1;  // no token embedding: the patches are the tokens
  b.pad_token_id = b.bos_token_id = b.eos_token_id = b.decoder_start_token_id = -1;
  ConfigSchema s;
  s.base = b;
  s.keys = {int_key("hidden_size", &ModelConfig::d_model, 1), int_key("num_hidden_layers", &ModelConfig::n_layers, 1),
            int_key("num_attention_heads", &ModelConfig::n_heads, 1),
            int_key("intermediate_size", &ModelConfig::d_ff, 1),
            mapped_key("hidden_act", &ModelConfig::activation,
                       {{"gelu", FfnActivation::gelu}, {"gelu_new", FfnActivation::gelu_tanh},
                        {"gelu_pytorch_tanh", FfnActivation::gelu_tanh}, {"relu", FfnActivation::relu},
                        {"silu", FfnActivation::silu}}),
            shared_dropout_key("hidden_dropout_prob"),
            double_key("attention_probs_dropout_prob", &ModelConfig::attention_dropout, 0, 0.999),
            double_key("initializer_range", &ModelConfig::init_std, 0, 10),
            double_key("layer_norm_eps", &ModelConfig::norm_eps, 0, 1),
            int_key("image_size", &ModelConfig::image_size, 1), int_key("patch_size", &ModelConfig::patch_size, 1),
            int_key("num_channels", &ModelConfig::num_channels, 1), bool_key("qkv_bias", &ModelConfig::bias),
            fixed_key("problem_type", "single_label_classification"),
            unless_default(mapped_key("position_embedding_type", &ModelConfig::position,
                                      {{"learned", PositionKind::learned}, {"sincos_2d", PositionKind::sincos_2d}}),
                           json("learned")),
            unless_default(bool_key("use_cls_token", &ModelConfig::cls_token), json(true))};
  // encoder_stride: the masked-image-modeling decoder's, which no model here has.
  s.ignored = {"torch_dtype", "transformers_version", "_name_or_path", "label2id", "_attn_implementation",
               "encoder_stride", "pooler_output_size", "pooler_act"};
  s.finish = finish_image_config;
  for (auto& k : common_keys()) s.keys.push_back(std::move(k));
  return s;
}


std::vector<ParamSpec> vit_encoder_specs(const ModelConfig& c, const std::string& root) {
  const std::int64_t C = c.d_model;
  std::vector<ParamSpec> s;
  if (c.cls_token) s.push_back({root + "embeddings.cls_token", {1, 1, C}});
  if (c.distillation_token) s.push_back({root + "embeddings.distillation_token", {1, 1, C}});
  if (c.position == PositionKind::learned) s.push_back({root + "embeddings.position_embeddings", {1, c.image_tokens(), C}});
  s.push_back({root + "embeddings.patch_embeddings.projection.weight", {C, c.num_channels, c.patch_size, c.patch_size}});
  s.push_back({root + "embeddings.patch_embeddings.projection.bias", {C}});
  for (std::int64_t i = 0; i < c.n_layers; ++i) {
    const std::string p = layer_prefix(root + "encoder.layer", i);
    add_norm_spec(s, p + "layernorm_before", c);
    for (const char* m : {"query", "key", "value"}) add_linear_spec(s, p + "attention.attention." + m, C, C, c.bias);
    add_linear_spec(s, p + "attention.output.dense", C, C, true);
    add_norm_spec(s, p + "layernorm_after", c);
    add_linear_spec(s, p + "intermediate.dense", c.d_ff, C, true);
    add_linear_spec(s, p + "output.dense", C, c.d_ff, true);
  }
  add_norm_spec(s, root + "layernorm", c);
  return s;
}

void wire_vit_encoder(Layout& l, const ModelConfig& c, const WireParams& P, const std::string& root) {
  TFM_CHECK(c.reads_images(), "model", "a ", c.model_type, " model needs image_size and patch_size");
  if (c.cls_token) l.cls_token = P.need(root + "embeddings.cls_token");
  if (c.distillation_token) l.dist_token = P.need(root + "embeddings.distillation_token");
  if (c.position == PositionKind::learned) l.pos_emb = P.need(root + "embeddings.position_embeddings");
  l.patch_weight = P.need(root + "embeddings.patch_embeddings.projection.weight");
  l.patch_bias = P.need(root + "embeddings.patch_embeddings.projection.bias");
  for (std::int64_t i = 0; i < c.n_layers; ++i) {
    const std::string p = layer_prefix(root + "encoder.layer", i);
    Layer L;
    L.name = p;
    L.self_norm = P.norm(p + "layernorm_before", c);
    L.self_attn = wire_attention(P, c, p + "attention.", {"attention.query", "attention.key", "attention.value", "output.dense"});
    L.ffn_norm = P.norm(p + "layernorm_after", c);
    L.ffn = ffn_shape(c);
    L.ffn.up = P.linear(p + "intermediate.dense");
    L.ffn.down = P.linear(p + "output.dense");
    l.encoder.layers.push_back(L);
  }
  l.encoder.has_final_norm = true;
  l.encoder.final_norm = P.norm(root + "layernorm", c);
}

Family vit_family() {
  Family f;
  f.model_type = "vit";
  f.schema = schema();
  ModelConfig b16 = f.schema.base;  // ViT-B/16 with ImageNet-1k's classes
  b16.num_labels = 1000;
  b16.max_positions = b16.num_patches() + 1;
  f.presets = {{"vit-b16", b16}};
  f.parameters = parameters;
  f.wire = wire;
  f.hub_prefix = "vit.";
  f.hub_drops = hub_drops;
  return f;
}

}  // namespace tfm
