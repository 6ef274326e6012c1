// The engine's own family ("transformer"): every component of the textbook as a config
// switch (docs/design.md lists its parameter names), and the Vaswani et al. preset.
#include <cmath>

#include "models/families/families.h"

namespace tfm {
namespace {

ConfigSchema schema() {
  ConfigSchema s;
  s.keys = {enum_key("architecture", &ModelConfig::architecture),
            int_key("vocab_size", &ModelConfig::vocab_size, 1), int_key("d_model", &ModelConfig::d_model, 1),
            int_key("n_heads", &ModelConfig::n_heads, 1), int_key("n_kv_heads", &ModelConfig::n_kv_heads, 0),
            int_key("head_dim", &ModelConfig::head_dim, 0), int_key("n_layers", &ModelConfig::n_layers, 1),
            int_key("n_decoder_layers", &ModelConfig::n_decoder_layers, 0), int_key("d_ff", &ModelConfig::d_ff, 1),
            int_key("max_positions", &ModelConfig::max_positions, 1),
            int_key("type_vocab_size", &ModelConfig::type_vocab_size, 0), enum_key("norm", &ModelConfig::norm),
            enum_key("norm_placement", &ModelConfig::norm_placement),
            double_key("norm_eps", &ModelConfig::norm_eps, 0, 1), bool_key("final_norm", &ModelConfig::final_norm),
            bool_key("embedding_norm", &ModelConfig::embedding_norm),
            enum_key("activation", &ModelConfig::activation), bool_key("bias", &ModelConfig::bias),
            bool_key("qkv_bias", &ModelConfig::qkv_bias),
            enum_key("sinusoid_pairing", &ModelConfig::sinusoid_pairing),
            bool_key("logits_bias", &ModelConfig::logits_bias),
            enum_key("position", &ModelConfig::position), bool_key("scale_embeddings", &ModelConfig::scale_embeddings),
            double_key("rope_base", &ModelConfig::rope_base, 1, 1e12),
            enum_key("rope_pairing", &ModelConfig::rope_pairing),
            int_key("relative_buckets", &ModelConfig::relative_buckets, 1),
            int_key("relative_max_distance", &ModelConfig::relative_max_distance, 1),
            bool_key("scale_attention_scores", &ModelConfig::scale_attention_scores),
            double_key("dropout", &ModelConfig::dropout, 0, 0.999),
            double_key("attention_dropout", &ModelConfig::attention_dropout, 0, 0.999),
            double_key("embedding_dropout", &ModelConfig::embedding_dropout, 0, 0.999),
            bool_key("tie_embeddings", &ModelConfig::tie_embeddings),
            int_key("pad_token_id", &ModelConfig::pad_token_id, -1), int_key("bos_token_id", &ModelConfig::bos_token_id, -1),
            int_key("eos_token_id", &ModelConfig::eos_token_id, -1),
            int_key("decoder_start_token_id", &ModelConfig::decoder_start_token_id, -1),
            double_key("init_std", &ModelConfig::init_std, 0, 10)};
  for (auto& k : common_keys()) s.keys.push_back(std::move(k));
  return s;
}

// Vaswani et al. 2017, base model (table 3).
ModelConfig vaswani() {
  ModelConfig c;
  c.model_type = "transformer";
  c.architecture = Architecture::encoder_decoder;
  c.vocab_size = 37000;
  c.d_model = 512;
  c.n_heads = 8;
  c.n_layers = 6;
  c.d_ff = 2048;
  c.max_positions = 5000;
  c.norm = NormKind::layer_norm;
  c.norm_placement = NormPlacement::post;
  c.final_norm = true;  // as torch.nn.Transformer builds it
  c.activation = FfnActivation::relu;
  c.position = PositionKind::sinusoidal;
  c.scale_embeddings = true;
  c.dropout = c.attention_dropout = c.embedding_dropout = 0.1;
  c.tie_embeddings = true;
  c.init_std = 0.0;  // 0: Xavier-uniform, as the reference implementation and nn.Transformer
  return c;
}

// ---- parameters ----------------------------------------------------------------------------
using Specs = std::vector<ParamSpec>;

}  // namespace

void engine_attention_specs(Specs& s, const std::string& p, const ModelConfig& c) {
  const std::int64_t q = c.n_heads * c.dim_head(), kv = c.kv_heads() * c.dim_head();
  add_linear_spec(s, p + "q_proj", q, c.d_model, c.bias || c.qkv_bias);
  add_linear_spec(s, p + "k_proj", kv, c.d_model, c.bias || c.qkv_bias);
  add_linear_spec(s, p + "v_proj", kv, c.d_model, c.bias || c.qkv_bias);
  add_linear_spec(s, p + "o_proj", c.d_model, q, c.bias);
}

namespace {

void ffn_specs(Specs& s, const std::string& p, const ModelConfig& c) {
  if (c.gated_ffn()) add_linear_spec(s, p + "gate_proj", c.d_ff, c.d_model, c.bias);
  add_linear_spec(s, p + "up_proj", c.d_ff, c.d_model, c.bias);
  add_linear_spec(s, p + "down_proj", c.d_model, c.d_ff, c.bias);
}

}  // namespace

void engine_stack_specs(Specs& s, const std::string& name, std::int64_t layers, bool cross, const ModelConfig& c) {
  if (c.position == PositionKind::t5_relative)
    s.push_back({name + ".relative_attention_bias.weight", {c.relative_buckets, c.n_heads}});
  for (std::int64_t i = 0; i < layers; ++i) {
    const std::string p = layer_prefix(name + ".layers", i);
    add_norm_spec(s, p + "self_attn_norm", c);
    engine_attention_specs(s, p + "self_attn.", c);
    if (cross) {
      add_norm_spec(s, p + "cross_attn_norm", c);
      engine_attention_specs(s, p + "cross_attn.", c);
    }
    add_norm_spec(s, p + "ffn_norm", c);
    ffn_specs(s, p + "ffn.", c);
  }
  if (c.final_norm) add_norm_spec(s, name + ".norm", c);
}

namespace {

void head_specs(Specs& s, const ModelConfig& c) {
  switch (c.head) {
    case HeadKind::lm:
      if (!c.tie_embeddings) s.push_back({"lm_head.weight", {c.vocab_size, c.d_model}});
      if (c.logits_bias) s.push_back({"final_logits_bias", {1, c.vocab_size}});
      break;
    case HeadKind::classifier:
      add_linear_spec(s, "classifier", c.num_labels, c.d_model, true);
      break;
    case HeadKind::masked_lm:
      add_linear_spec(s, "mlm_head.dense", c.d_model, c.d_model, true);
      s.push_back({"mlm_head.norm.weight", {c.d_model}});
      s.push_back({"mlm_head.norm.bias", {c.d_model}});
      if (!c.tie_embeddings) s.push_back({"mlm_head.decoder.weight", {c.vocab_size, c.d_model}});
      s.push_back({"mlm_head.bias", {c.vocab_size}});
      break;
    case HeadKind::none:
      break;
  }
}

Specs parameters(const ModelConfig& c) {
  Specs s;
  s.push_back({"embed_tokens.weight", {c.vocab_size, c.d_model}});
  if (c.position == PositionKind::learned) s.push_back({"embed_positions.weight", {c.max_positions, c.d_model}});
  if (c.type_vocab_size > 0) s.push_back({"embed_token_types.weight", {c.type_vocab_size, c.d_model}});
  if (c.embedding_norm) add_norm_spec(s, "embed_norm", c);
  switch (c.architecture) {
    case Architecture::encoder_only: engine_stack_specs(s, "encoder", c.n_layers, false, c); break;
    case Architecture::decoder_only: engine_stack_specs(s, "decoder", c.n_layers, false, c); break;
    case Architecture::encoder_decoder:
      engine_stack_specs(s, "encoder", c.n_layers, false, c);
      engine_stack_specs(s, "decoder", c.decoder_layers(), true, c);
      break;
  }
  head_specs(s, c);
  return s;
}

// ---- modules -------------------------------------------------------------------------------
constexpr std::array<const char*, 4> kNames{"q_proj", "k_proj", "v_proj", "o_proj"};

}  // namespace

void wire_engine_stack(Stack& s, const std::string& name, std::int64_t n, bool cross, const ModelConfig& c,
                       const WireParams& P) {
  s.relative_bias = P.maybe(name + ".relative_attention_bias.weight");
  for (std::int64_t i = 0; i < n; ++i) {
    const std::string p = layer_prefix(name + ".layers", i);
    Layer L;
    L.name = p;
    L.self_norm = P.norm(p + "self_attn_norm", c);
    L.self_attn = wire_attention(P, c, p + "self_attn.", kNames);
    if (cross) {
      L.cross_norm = P.norm(p + "cross_attn_norm", c);
      L.cross_attn = wire_attention(P, c, p + "cross_attn.", kNames);
    }
    L.ffn_norm = P.norm(p + "ffn_norm", c);
    L.ffn = ffn_shape(c);
    if (c.gated_ffn()) L.ffn.gate = P.linear(p + "ffn.gate_proj");
    L.ffn.up = P.linear(p + "ffn.up_proj");
    L.ffn.down = P.linear(p + "ffn.down_proj");
    s.layers.push_back(L);
  }
  s.has_final_norm = c.final_norm;
  if (c.final_norm) s.final_norm = P.norm(name + ".norm", c);
}

namespace {

void wire(Layout& l, const ModelConfig& c, const WireParams& P) {
  l.tok_emb = P.need("embed_tokens.weight");
  l.pos_emb = P.maybe("embed_positions.weight");
  l.type_emb = P.maybe("embed_token_types.weight");
  l.has_embed_norm = c.embedding_norm;
  if (c.embedding_norm) l.embed_norm = P.norm("embed_norm", c);
  if (c.architecture != Architecture::decoder_only) wire_engine_stack(l.encoder, "encoder", c.n_layers, false, c, P);
  if (c.architecture == Architecture::decoder_only) wire_engine_stack(l.decoder, "decoder", c.n_layers, false, c, P);
  if (c.architecture == Architecture::encoder_decoder) wire_engine_stack(l.decoder, "decoder", c.decoder_layers(), true, c, P);
  l.lm_head = c.tie_embeddings ? l.tok_emb : P.maybe("lm_head.weight");
  l.logits_bias = P.maybe("final_logits_bias");
  if (c.head == HeadKind::classifier) l.classifier = P.linear("classifier");
  if (c.head == HeadKind::masked_lm) {
    l.mlm_dense = P.linear("mlm_head.dense");
    l.mlm_norm = nn::Norm{NormKind::layer_norm, P.need("mlm_head.norm.weight"), P.need("mlm_head.norm.bias"), c.norm_eps};
    l.mlm_decoder = c.tie_embeddings ? l.tok_emb : P.need("mlm_head.decoder.weight");
    l.mlm_bias = P.need("mlm_head.bias");
  }
}

// init_std 0 (the Vaswani preset): token embeddings N(0, d^-1/2) (they are multiplied by
// sqrt(d)), tables of relative biases small, projection matrices Xavier-uniform as
// nn.Transformer does.
double init_std(const ModelConfig& c, const std::string& n) {
  if (c.init_std != 0.0) return c.init_std;
  if (n.find("embed_") != std::string::npos || n.find("relative_attention_bias") != std::string::npos)
    return std::pow(static_cast<double>(c.d_model), -0.5);
  return 0.0;
}

}  // namespace

Family transformer_family() {
  Family f;
  f.model_type = "transformer";
  f.schema = schema();
  f.presets = {{"vaswani", vaswani()}};
  f.parameters = parameters;
  f.wire = wire;
  f.exact_hub_names = true;
  f.init_std = init_std;
  return f;
}

}  // namespace tfm
