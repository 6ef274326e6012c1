// T5 (T5ForConditionalGeneration, v1.0 and v1.1): a pre-RMSNorm encoder-decoder without
// biases, bucketed relative position biases shared by a stack's layers, unscaled scores, and
// the tied head rescaled by d_model^-1/2.
#include <cmath>

#include "models/families/families.h"
#include "tfm/error.h"

namespace tfm {
namespace {

using json = nlohmann::json;

ConfigSchema schema() {
  ModelConfig b;
  b.model_type = "t5";
  b.architecture = Architecture::encoder_decoder;
  b.norm = NormKind::rms_norm;
  b.norm_placement = NormPlacement::pre;
  b.norm_eps = 1e-6;
  b.position = PositionKind::t5_relative;
  b.activation = FfnActivation::relu;
  b.bias = false;
  b.scale_attention_scores = false;
  b.pad_token_id = 0;
  b.eos_token_id = 1;
  b.bos_token_id = -1;
  b.decoder_start_token_id = 0;
  b.init_std = 1.0;  // T5's initializer_factor
  // T5Config's defaults (t5-small).
  b.vocab_size = 32128; b.d_model = 512; b.head_dim = 64; b.d_ff = 2048; b.n_layers = 6; b.n_heads = 8;
  b.max_positions = 512;
  ConfigSchema s;
  s.base = b;
  s.keys = {int_key("vocab_size", &ModelConfig::vocab_size, 1), int_key("d_model", &ModelConfig::d_model, 1),
            int_key("d_kv", &ModelConfig::head_dim, 1), int_key("d_ff", &ModelConfig::d_ff, 1),
            int_key("num_layers", &ModelConfig::n_layers, 1),
            int_key("num_decoder_layers", &ModelConfig::n_decoder_layers, 0),
            int_key("num_heads", &ModelConfig::n_heads, 1),
            int_key("relative_attention_num_buckets", &ModelConfig::relative_buckets, 1),
            int_key("relative_attention_max_distance", &ModelConfig::relative_max_distance, 1),
            shared_dropout_key("dropout_rate"),
            double_key("layer_norm_epsilon", &ModelConfig::norm_eps, 0, 1),
            double_key("initializer_factor", &ModelConfig::init_std, 0, 10),
            mapped_key("feed_forward_proj", &ModelConfig::activation,
                                      {{"relu", FfnActivation::relu}, {"gated-gelu", FfnActivation::geglu},
                                       {"gated-relu", FfnActivation::reglu}, {"gated-silu", FfnActivation::swiglu}}),
            bool_key("tie_word_embeddings", &ModelConfig::tie_embeddings),
            int_key("pad_token_id", &ModelConfig::pad_token_id, -1), int_key("eos_token_id", &ModelConfig::eos_token_id, -1),
            int_key("decoder_start_token_id", &ModelConfig::decoder_start_token_id, -1)};
  s.keys.push_back(architectures_key({{"T5ForConditionalGeneration", HeadKind::lm}}));
  s.ignored = {"n_positions", "output_past", "task_specific_params", "transformers_version", "torch_dtype",
               "use_cache", "is_encoder_decoder", "is_gated_act", "dense_act_fn", "_name_or_path",
               "classifier_dropout", "_attn_implementation"};
  for (auto& k : common_keys()) s.keys.push_back(std::move(k));
  return s;
}

// t5-base.
ModelConfig t5_base() {
  ModelConfig c = schema().base;
  c.d_model = 768; c.n_layers = 12; c.n_decoder_layers = 12; c.n_heads = 12; c.d_ff = 3072;
  return c;
}

using Specs = std::vector<ParamSpec>;

void attention_specs(Specs& s, const std::string& p, const ModelConfig& c) {
  const std::int64_t inner = c.n_heads * c.dim_head();
  for (const char* n : {"q", "k", "v"}) s.push_back({p + n + ".weight", {inner, c.d_model}});
  s.push_back({p + "o.weight", {c.d_model, inner}});
}

void ffn_specs(Specs& s, const std::string& p, const ModelConfig& c) {
  if (c.gated_ffn()) {
    s.push_back({p + "DenseReluDense.wi_0.weight", {c.d_ff, c.d_model}});
    s.push_back({p + "DenseReluDense.wi_1.weight", {c.d_ff, c.d_model}});
  } else {
    s.push_back({p + "DenseReluDense.wi.weight", {c.d_ff, c.d_model}});
  }
  s.push_back({p + "DenseReluDense.wo.weight", {c.d_model, c.d_ff}});
  s.push_back({p + "layer_norm.weight", {c.d_model}});
}

Specs parameters(const ModelConfig& c) {
  Specs s{{"shared.weight", {c.vocab_size, c.d_model}}};
  for (const char* side : {"encoder", "decoder"}) {
    const bool dec = std::string(side) == "decoder";
    const std::int64_t layers = dec ? c.decoder_layers() : c.n_layers;
    for (std::int64_t i = 0; i < layers; ++i) {
      const std::string p = layer_prefix(std::string(side) + ".block", i);
      attention_specs(s, p + "layer.0.SelfAttention.", c);
      if (i == 0) s.push_back({p + "layer.0.SelfAttention.relative_attention_bias.weight", {c.relative_buckets, c.n_heads}});
      s.push_back({p + "layer.0.layer_norm.weight", {c.d_model}});
      if (dec) {
        attention_specs(s, p + "layer.1.EncDecAttention.", c);
        s.push_back({p + "layer.1.layer_norm.weight", {c.d_model}});
      }
      ffn_specs(s, p + (dec ? "layer.2." : "layer.1."), c);
    }
    s.push_back({std::string(side) + ".final_layer_norm.weight", {c.d_model}});
  }
  if (!c.tie_embeddings) s.push_back({"lm_head.weight", {c.vocab_size, c.d_model}});
  return s;
}

constexpr std::array<const char*, 4> kNames{"q", "k", "v", "o"};

void wire(Layout& l, const ModelConfig& c, const WireParams& P) {
  l.tok_emb = P.need("shared.weight");
  for (const char* side : {"encoder", "decoder"}) {
    const bool dec = std::string(side) == "decoder";
    Stack& s = dec ? l.decoder : l.encoder;
    const std::int64_t n = dec ? c.decoder_layers() : c.n_layers;
    s.relative_bias = P.need(std::string(side) + ".block.0.layer.0.SelfAttention.relative_attention_bias.weight");
    for (std::int64_t i = 0; i < n; ++i) {
      const std::string p = layer_prefix(std::string(side) + ".block", i);
      Layer L;
      L.name = p;
      L.self_norm = P.norm(p + "layer.0.layer_norm", c);
      L.self_attn = wire_attention(P, c, p + "layer.0.SelfAttention.", kNames);
      if (dec) {
        L.cross_norm = P.norm(p + "layer.1.layer_norm", c);
        L.cross_attn = wire_attention(P, c, p + "layer.1.EncDecAttention.", kNames);
      }
      const std::string f = p + (dec ? "layer.2." : "layer.1.");
      L.ffn_norm = P.norm(f + "layer_norm", c);
      L.ffn = ffn_shape(c);
      L.ffn.glu_gelu_tanh = true;  // T5 v1.1's "gated-gelu" is gelu_new
      L.ffn.dropout = c.dropout;   // T5 drops the FFN's hidden units too
      if (c.gated_ffn()) {
        L.ffn.gate = P.linear(f + "DenseReluDense.wi_0");
        L.ffn.up = P.linear(f + "DenseReluDense.wi_1");
      } else {
        L.ffn.up = P.linear(f + "DenseReluDense.wi");
      }
      L.ffn.down = P.linear(f + "DenseReluDense.wo");
      s.layers.push_back(L);
    }
    s.has_final_norm = true;
    s.final_norm = P.norm(std::string(side) + ".final_layer_norm", c);
    s.dropout_after_final_norm = true;
  }
  l.lm_head = c.tie_embeddings ? l.tok_emb : P.need("lm_head.weight");
  if (c.tie_embeddings) l.lm_scale = 1.0 / std::sqrt(static_cast<double>(c.d_model));
}

// T5Model's stacks keep their own copy of the shared embedding.
bool hub_drops(const ModelConfig&, const std::string& n) {
  return n == "encoder.embed_tokens.weight" || n == "decoder.embed_tokens.weight";
}

// T5's _init_weights, with initializer_factor f.
double init_std(const ModelConfig& c, const std::string& n) {
  const double f = c.init_std, d = static_cast<double>(c.d_model), dkv = static_cast<double>(c.dim_head());
  const double h = static_cast<double>(c.n_heads);
  if (n == "shared.weight" || n == "lm_head.weight") return f;
  if (ends_with(n, ".q.weight")) return f * std::pow(d * dkv, -0.5);
  if (ends_with(n, ".k.weight") || ends_with(n, ".v.weight")) return f * std::pow(d, -0.5);
  if (ends_with(n, ".o.weight")) return f * std::pow(h * dkv, -0.5);
  if (n.find("relative_attention_bias") != std::string::npos) return f * std::pow(d, -0.5);
  if (n.find(".wo.weight") != std::string::npos) return f * std::pow(static_cast<double>(c.d_ff), -0.5);
  return f * std::pow(d, -0.5);  // wi, wi_0, wi_1
}

}  // namespace

Family t5_family() {
  Family f;
  f.model_type = "t5";
  f.schema = schema();
  f.presets = {{"t5", t5_base()}};
  f.parameters = parameters;
  f.wire = wire;
  f.hub_drops = hub_drops;  // T5Model and T5ForConditionalGeneration share unprefixed names
  f.init_std = init_std;
  return f;
}

}  // namespace tfm
