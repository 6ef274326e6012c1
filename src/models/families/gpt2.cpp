// GPT-2 (Hugging Face's GPT2LMHeadModel / GPT2Model, llama.cpp's "gpt2"): pre-LayerNorm,
// learned positions, tanh GELU, biases everywhere, Conv1D weights stored (in, out).
#include <cmath>

#include "models/families/families.h"
#include "tfm/error.h"
#include "tfm/ops.h"

namespace tfm {
namespace {

using json = nlohmann::json;

ConfigSchema schema() {
  ModelConfig b;
  b.model_type = "gpt2";
  b.architecture = Architecture::decoder_only;
  b.norm = NormKind::layer_norm;
  b.norm_placement = NormPlacement::pre;
  b.position = PositionKind::learned;
  // GPT2Config's defaults (GPT-2 small); keys a config.json leaves out keep them.
  b.vocab_size = 50257; b.d_model = 768; b.n_layers = 12; b.n_heads = 12; b.max_positions = 1024;
  b.d_ff = 0;  // n_inner null: 4 * n_embd (resolved after parsing)
  b.activation = FfnActivation::gelu_tanh;  // "gelu_new"
  b.bos_token_id = b.eos_token_id = 50256;
  b.pad_token_id = -1;
  ConfigSchema s;
  s.base = b;
  s.keys = {int_key("vocab_size", &ModelConfig::vocab_size, 1), int_key("n_embd", &ModelConfig::d_model, 1),
            int_key("n_layer", &ModelConfig::n_layers, 1), int_key("n_head", &ModelConfig::n_heads, 1),
            int_key("n_positions", &ModelConfig::max_positions, 1),
            nullable_int_key("n_inner", &ModelConfig::d_ff, 0, 1),
            double_key("layer_norm_epsilon", &ModelConfig::norm_eps, 0, 1),
            mapped_key("activation_function", &ModelConfig::activation,
                                      {{"gelu_new", FfnActivation::gelu_tanh}, {"gelu_pytorch_tanh", FfnActivation::gelu_tanh},
                                       {"gelu", FfnActivation::gelu}, {"relu", FfnActivation::relu}, {"silu", FfnActivation::silu}}),
            double_key("resid_pdrop", &ModelConfig::dropout, 0, 0.999),
            double_key("attn_pdrop", &ModelConfig::attention_dropout, 0, 0.999),
            double_key("embd_pdrop", &ModelConfig::embedding_dropout, 0, 0.999),
            double_key("initializer_range", &ModelConfig::init_std, 0, 10),
            int_key("bos_token_id", &ModelConfig::bos_token_id, -1), int_key("eos_token_id", &ModelConfig::eos_token_id, -1),
            bool_key("tie_word_embeddings", &ModelConfig::tie_embeddings),
            architectures_key({{"GPT2LMHeadModel", HeadKind::lm}, {"GPT2Model", HeadKind::none}}),
            fixed_key("scale_attn_weights", true), fixed_key("scale_attn_by_inverse_layer_idx", false)};
  s.ignored = {"n_ctx", "summary_activation", "summary_first_dropout", "summary_proj_to_labels", "summary_type",
               "summary_use_proj", "task_specific_params", "torch_dtype", "transformers_version", "use_cache",
               "reorder_and_upcast_attn", "_name_or_path", "pad_token_id", "label2id", "_attn_implementation"};
  for (auto& k : common_keys()) s.keys.push_back(std::move(k));
  return s;
}

ModelConfig gpt2_small() {
  ModelConfig c = schema().base;
  c.d_ff = 4 * c.d_model;  // n_inner null: GPT-2 small
  return c;
}

std::vector<ParamSpec> parameters(const ModelConfig& c) {
  const std::int64_t C = c.d_model;
  const std::int64_t A = c.n_heads * c.dim_head();  // C, but a tensor-parallel shard's heads only
  std::vector<ParamSpec> s{{"transformer.wte.weight", {c.vocab_size, C}}, {"transformer.wpe.weight", {c.max_positions, C}}};
  for (std::int64_t i = 0; i < c.n_layers; ++i) {
    const std::string p = layer_prefix("transformer.h", i);
    s.push_back({p + "ln_1.weight", {C}});
    s.push_back({p + "ln_1.bias", {C}});
    s.push_back({p + "attn.c_attn.weight", {C, 3 * A}});  // Conv1D: (in, out)
    s.push_back({p + "attn.c_attn.bias", {3 * A}});
    s.push_back({p + "attn.c_proj.weight", {A, C}});
    s.push_back({p + "attn.c_proj.bias", {C}});
    s.push_back({p + "ln_2.weight", {C}});
    s.push_back({p + "ln_2.bias", {C}});
    s.push_back({p + "mlp.c_fc.weight", {C, c.d_ff}});
    s.push_back({p + "mlp.c_fc.bias", {c.d_ff}});
    s.push_back({p + "mlp.c_proj.weight", {c.d_ff, C}});
    s.push_back({p + "mlp.c_proj.bias", {C}});
  }
  s.push_back({"transformer.ln_f.weight", {C}});
  s.push_back({"transformer.ln_f.bias", {C}});
  if (!c.tie_embeddings) s.push_back({"lm_head.weight", {c.vocab_size, C}});
  return s;
}

void wire(Layout& l, const ModelConfig& c, const WireParams& P) {
  l.tok_emb = P.need("transformer.wte.weight");
  l.pos_emb = P.need("transformer.wpe.weight");
  for (std::int64_t i = 0; i < c.n_layers; ++i) {
    const std::string p = layer_prefix("transformer.h", i);
    Layer L;
    L.name = p;
    L.self_norm = P.norm(p + "ln_1", c);
    L.self_attn = attention_shape(c);
    L.self_attn.qkv_proj = P.linear(p + "attn.c_attn", true);
    L.self_attn.o_proj = P.linear(p + "attn.c_proj", true);
    L.ffn_norm = P.norm(p + "ln_2", c);
    L.ffn = ffn_shape(c);
    L.ffn.up = P.linear(p + "mlp.c_fc", true);
    L.ffn.down = P.linear(p + "mlp.c_proj", true);
    l.decoder.layers.push_back(L);
  }
  l.decoder.has_final_norm = true;
  l.decoder.final_norm = P.norm("transformer.ln_f", c);
  l.lm_head = c.tie_embeddings ? l.tok_emb : P.need("lm_head.weight");
}

// The causal mask (attn.bias) and its fill value (attn.masked_bias) are buffers.
bool hub_drops(const ModelConfig&, const std::string& n) {
  return ends_with(n, ".attn.bias") || ends_with(n, ".attn.masked_bias");
}

// GPT-2 scales the residual projections by 1/sqrt(2 * n_layer) (section 2.3 of the paper).
double init_std(const ModelConfig& c, const std::string& n) {
  return n.find("c_proj.weight") != std::string::npos ? c.init_std / std::sqrt(2.0 * static_cast<double>(c.n_layers))
                                                      : c.init_std;
}

// ---- llama.cpp's "gpt2" ----------------------------------------------------------------------
json gguf_config(const GgufFile& f, const GgufSizes& z) {
  return {{"vocab_size", z.vocab}, {"n_embd", z.d_model}, {"n_layer", z.layers}, {"n_head", z.heads},
          {"n_positions", z.context}, {"n_inner", z.d_ff}, {"activation_function", "gelu_new"},
          {"layer_norm_epsilon", f.get_float("gpt2.attention.layer_norm_epsilon", 1e-5)},
          {"resid_pdrop", 0.0}, {"attn_pdrop", 0.0}, {"embd_pdrop", 0.0}, {"tie_word_embeddings", z.tied}};
}

std::vector<GgufTensorName> gguf_tensors(const ModelConfig& c) {
  using N = GgufTensorName;
  std::vector<N> t{{"token_embd.weight", "transformer.wte.weight"}, {"position_embd.weight", "transformer.wpe.weight"},
                   {"output_norm.weight", "transformer.ln_f.weight"}, {"output_norm.bias", "transformer.ln_f.bias"}};
  for (std::int64_t i = 0; i < c.n_layers; ++i) {
    const std::string p = layer_prefix("transformer.h", i);
    t.push_back({gguf_block(i, "attn_norm.weight"), p + "ln_1.weight"});
    t.push_back({gguf_block(i, "attn_norm.bias"), p + "ln_1.bias"});
    t.push_back({gguf_block(i, "attn_qkv.weight"), p + "attn.c_attn.weight", N::transpose});
    t.push_back({gguf_block(i, "attn_qkv.bias"), p + "attn.c_attn.bias"});
    t.push_back({gguf_block(i, "attn_output.weight"), p + "attn.c_proj.weight", N::transpose});
    t.push_back({gguf_block(i, "attn_output.bias"), p + "attn.c_proj.bias"});
    t.push_back({gguf_block(i, "ffn_norm.weight"), p + "ln_2.weight"});
    t.push_back({gguf_block(i, "ffn_norm.bias"), p + "ln_2.bias"});
    t.push_back({gguf_block(i, "ffn_up.weight"), p + "mlp.c_fc.weight", N::transpose});
    t.push_back({gguf_block(i, "ffn_up.bias"), p + "mlp.c_fc.bias"});
    t.push_back({gguf_block(i, "ffn_down.weight"), p + "mlp.c_proj.weight", N::transpose});
    t.push_back({gguf_block(i, "ffn_down.bias"), p + "mlp.c_proj.bias"});
  }
  if (!c.tie_embeddings) t.push_back({"output.weight", "lm_head.weight"});
  return t;
}

void gguf_metadata(const ModelConfig& c, const std::string& path, std::vector<std::pair<std::string, GgufValue>>& meta) {
  TFM_CHECK(c.activation == FfnActivation::gelu_tanh, path, "gpt2 in llama.cpp uses the tanh GELU; this model's activation is ",
            to_string(c.activation));
  meta.emplace_back("gpt2.attention.layer_norm_epsilon", GgufValue::f32(static_cast<float>(c.norm_eps)));
}

// ---- the engine's scheme computing GPT-2 -------------------------------------------------------
bool computes_as_engine(const ModelConfig& c) {
  return engine_decoder_lm(c) && c.norm == NormKind::layer_norm && c.position == PositionKind::learned && c.bias &&
         c.activation == FfnActivation::gelu_tanh && c.kv_heads() == c.n_heads;
}

std::map<std::string, Tensor> from_engine(const ModelConfig& c, const std::map<std::string, Tensor>& p) {
  std::map<std::string, Tensor> hf;
  auto get = [&](const std::string& n) { return p.at(n); };
  for (std::int64_t i = 0; i < c.n_layers; ++i) {
    const std::string e = layer_prefix("decoder.layers", i), h = layer_prefix("transformer.h", i);
    for (const char* w : {"weight", "bias"}) {
      hf[h + "ln_1." + w] = get(e + "self_attn_norm." + w);
      hf[h + "ln_2." + w] = get(e + "ffn_norm." + w);
    }
    // Conv1D (in, out): the fused c_attn is [Wq; Wk; Wv] transposed.
    hf[h + "attn.c_attn.weight"] = conv1d_weight(concat_rows({get(e + "self_attn.q_proj.weight"),
                                                              get(e + "self_attn.k_proj.weight"),
                                                              get(e + "self_attn.v_proj.weight")}));
    hf[h + "attn.c_attn.bias"] = concat({get(e + "self_attn.q_proj.bias"), get(e + "self_attn.k_proj.bias"),
                                         get(e + "self_attn.v_proj.bias")}, 0);
    hf[h + "attn.c_proj.weight"] = conv1d_weight(get(e + "self_attn.o_proj.weight"));
    hf[h + "attn.c_proj.bias"] = get(e + "self_attn.o_proj.bias");
    hf[h + "mlp.c_fc.weight"] = conv1d_weight(get(e + "ffn.up_proj.weight"));
    hf[h + "mlp.c_fc.bias"] = get(e + "ffn.up_proj.bias");
    hf[h + "mlp.c_proj.weight"] = conv1d_weight(get(e + "ffn.down_proj.weight"));
    hf[h + "mlp.c_proj.bias"] = get(e + "ffn.down_proj.bias");
  }
  hf["transformer.wte.weight"] = get("embed_tokens.weight");
  hf["transformer.wpe.weight"] = get("embed_positions.weight");
  hf["transformer.ln_f.weight"] = get("decoder.norm.weight");
  hf["transformer.ln_f.bias"] = get("decoder.norm.bias");
  if (!c.tie_embeddings) hf["lm_head.weight"] = get("lm_head.weight");
  return hf;
}

}  // namespace

Family gpt2_family() {
  Family f;
  f.model_type = "gpt2";
  f.schema = schema();
  f.presets = {{"gpt2", gpt2_small()}};
  f.parameters = parameters;
  f.wire = wire;
  f.hub_prefix = "transformer.";
  f.hub_drops = hub_drops;
  f.init_std = init_std;
  f.conv1d_linears = true;
  f.gguf = FamilyGguf{"gpt2", gguf_config, gguf_tensors, gguf_metadata};
  f.computes_as_engine = computes_as_engine;
  f.from_engine = from_engine;
  return f;
}

}  // namespace tfm
