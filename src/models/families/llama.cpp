// Llama (LlamaForCausalLM) and the families that share its names and layout: Mistral
// (sliding-window attention) and Qwen2 (q/k/v biases). Pre-RMSNorm, rotate-half RoPE,
// SwiGLU, no biases; llama.cpp's "llama" (Q/K rows permuted to its RoPE pairing) and "qwen2".
#include "models/families/families.h"
#include "tfm/error.h"

namespace tfm {
namespace {

using json = nlohmann::json;

// The three model_types this file registers.
const std::string kLlama = "llama", kMistral = "mistral", kQwen2 = "qwen2";

// LlamaForCausalLM and the families sharing its layout: mistral (sliding window), qwen2
// (q/k/v biases; its sliding window is off unless use_sliding_window, which is refused).
ConfigSchema schema(const std::string& type) {
  ModelConfig b;
  b.model_type = type;
  b.architecture = Architecture::decoder_only;
  b.norm = NormKind::rms_norm;
  b.norm_placement = NormPlacement::pre;
  b.norm_eps = 1e-6;
  b.position = PositionKind::rope;
  b.rope_pairing = RopePairing::halves;
  b.activation = FfnActivation::swiglu;
  b.bias = false;
  b.tie_embeddings = false;
  b.dropout = b.attention_dropout = b.embedding_dropout = 0.0;
  // LlamaConfig's defaults.
  b.vocab_size = 32000; b.d_model = 4096; b.d_ff = 11008; b.n_layers = 32; b.n_heads = 32;
  b.max_positions = 2048; b.bos_token_id = 1; b.eos_token_id = 2; b.pad_token_id = -1;
  std::string cls = "LlamaForCausalLM", base = "LlamaModel";
  if (type == kMistral) {  // MistralConfig's defaults (Mistral-7B-v0.1)
    b.d_ff = 14336; b.n_kv_heads = 8; b.max_positions = 4096 * 32; b.norm_eps = 1e-6; b.sliding_window = 4096;
    cls = "MistralForCausalLM", base = "MistralModel";
  }
  if (type == kQwen2) {  // Qwen2Config's defaults
    b.vocab_size = 151936; b.d_ff = 22016; b.n_kv_heads = 32; b.max_positions = 32768; b.qkv_bias = true;
    b.bos_token_id = b.eos_token_id = -1;
    cls = "Qwen2ForCausalLM", base = "Qwen2Model";
  }
  ConfigSchema s;
  s.base = b;
  s.keys = {int_key("vocab_size", &ModelConfig::vocab_size, 1), int_key("hidden_size", &ModelConfig::d_model, 1),
            int_key("intermediate_size", &ModelConfig::d_ff, 1),
            int_key("num_hidden_layers", &ModelConfig::n_layers, 1),
            int_key("num_attention_heads", &ModelConfig::n_heads, 1),
            nullable_int_key("num_key_value_heads", &ModelConfig::n_kv_heads, 0, 0),
            nullable_int_key("head_dim", &ModelConfig::head_dim, 0, 0),
            int_key("max_position_embeddings", &ModelConfig::max_positions, 1),
            double_key("rms_norm_eps", &ModelConfig::norm_eps, 0, 1),
            double_key("rope_theta", &ModelConfig::rope_base, 1, 1e12),
            bool_key("tie_word_embeddings", &ModelConfig::tie_embeddings),
            mapped_key("hidden_act", &ModelConfig::activation,
                                      {{"silu", FfnActivation::swiglu}, {"gelu", FfnActivation::geglu}, {"relu", FfnActivation::reglu}}),
            double_key("attention_dropout", &ModelConfig::attention_dropout, 0, 0.999),
            double_key("initializer_range", &ModelConfig::init_std, 0, 10),
            nullable_int_key("bos_token_id", &ModelConfig::bos_token_id, -1, -1),
            eos_key(),
            nullable_int_key("pad_token_id", &ModelConfig::pad_token_id, -1, -1),
            architectures_key({{cls, HeadKind::lm}, {base, HeadKind::none}}),
            fixed_key("mlp_bias", false)};
  if (type == kQwen2) {
    s.keys.push_back(fixed_key("use_sliding_window", false));
    // Qwen2 windows only layers >= max_window_layers, and only with use_sliding_window: both
    // keys are inert here (listed before the common sliding_window key, which they shadow).
    for (const char* k : {"sliding_window", "max_window_layers"}) s.keys.push_back(inert_key(k));
  } else {
    s.keys.push_back(bool_key("attention_bias", &ModelConfig::bias));
  }
  for (const char* k : {"torch_dtype", "transformers_version", "use_cache", "pretraining_tp", "_name_or_path",
                        "label2id", "_attn_implementation", "task_specific_params"})
    s.ignored.push_back(k);
  s.keys.push_back({"rope_scaling", [](ModelConfig&, const json& v, const std::string& w) {
                      TFM_CHECK(v.is_null(), w, "key 'rope_scaling': only null (no scaling) is supported, got ", v.dump());
                    }, nullptr});
  for (auto& k : common_keys()) s.keys.push_back(std::move(k));
  return s;
}

ModelConfig llama2_7b() {
  ModelConfig c = schema(kLlama).base;
  c.n_kv_heads = 32;
  c.max_positions = 4096;
  c.norm_eps = 1e-5;
  return c;
}

std::vector<ParamSpec> parameters(const ModelConfig& c) {
  const std::int64_t C = c.d_model, q = c.n_heads * c.dim_head(), kv = c.kv_heads() * c.dim_head();
  std::vector<ParamSpec> s{{"model.embed_tokens.weight", {c.vocab_size, C}}};
  for (std::int64_t i = 0; i < c.n_layers; ++i) {
    const std::string p = layer_prefix("model.layers", i);
    s.push_back({p + "input_layernorm.weight", {C}});
    // LlamaAttention: attention_bias puts biases on all four projections (c.bias); Qwen2 has
    // them on q, k and v only (c.qkv_bias).
    add_linear_spec(s, p + "self_attn.q_proj", q, C, c.bias || c.qkv_bias);
    add_linear_spec(s, p + "self_attn.k_proj", kv, C, c.bias || c.qkv_bias);
    add_linear_spec(s, p + "self_attn.v_proj", kv, C, c.bias || c.qkv_bias);
    add_linear_spec(s, p + "self_attn.o_proj", C, q, c.bias);
    s.push_back({p + "post_attention_layernorm.weight", {C}});
    add_linear_spec(s, p + "mlp.gate_proj", c.d_ff, C, false);
    add_linear_spec(s, p + "mlp.up_proj", c.d_ff, C, false);
    add_linear_spec(s, p + "mlp.down_proj", C, c.d_ff, false);
  }
  s.push_back({"model.norm.weight", {C}});
  if (!c.tie_embeddings) s.push_back({"lm_head.weight", {c.vocab_size, C}});
  return s;
}

void wire(Layout& l, const ModelConfig& c, const WireParams& P) {
  l.tok_emb = P.need("model.embed_tokens.weight");
  for (std::int64_t i = 0; i < c.n_layers; ++i) {
    const std::string p = layer_prefix("model.layers", i);
    Layer L;
    L.name = p;
    L.self_norm = P.norm(p + "input_layernorm", c);
    L.self_attn = wire_attention(P, c, p + "self_attn.", {"q_proj", "k_proj", "v_proj", "o_proj"});
    L.ffn_norm = P.norm(p + "post_attention_layernorm", c);
    L.ffn = ffn_shape(c);
    L.ffn.gate = P.linear(p + "mlp.gate_proj");
    L.ffn.up = P.linear(p + "mlp.up_proj");
    L.ffn.down = P.linear(p + "mlp.down_proj");
    l.decoder.layers.push_back(L);
  }
  l.decoder.has_final_norm = true;
  l.decoder.final_norm = P.norm("model.norm", c);
  l.lm_head = c.tie_embeddings ? l.tok_emb : P.need("lm_head.weight");
}

// ---- llama.cpp's "llama" and "qwen2" -------------------------------------------------------
json gguf_config(const std::string& arch, const GgufFile& f, const GgufSizes& z) {
  const std::string p = arch + ".";
  const std::int64_t kv = f.get_int(p + "attention.head_count_kv", z.heads);
  const std::int64_t head_dim = f.get_int(p + "attention.key_length", z.d_model / z.heads);
  TFM_CHECK(f.get_int(p + "attention.value_length", head_dim) == head_dim, f.path, "key '", p,
            "attention.value_length' differs from the key length (not supported)");
  const std::int64_t rope_dims = f.get_int(p + "rope.dimension_count", head_dim);
  TFM_CHECK(rope_dims == head_dim, f.path, "key '", p, "rope.dimension_count' = ", rope_dims,
            ": partial rotary embeddings are not supported (head_dim ", head_dim, ")");
  const std::string scaling = f.get_string(p + "rope.scaling.type", "none");
  TFM_CHECK(scaling == "none", f.path, "key '", p, "rope.scaling.type' = '", scaling, "': RoPE scaling is not supported");
  TFM_CHECK(f.get_int(p + "expert_count", 0) == 0, f.path, "key '", p,
            "expert_count': mixture-of-experts models are not supported");
  return {{"vocab_size", z.vocab}, {"hidden_size", z.d_model}, {"intermediate_size", z.d_ff},
          {"num_hidden_layers", z.layers}, {"num_attention_heads", z.heads}, {"num_key_value_heads", kv},
          {"head_dim", head_dim}, {"max_position_embeddings", z.context},
          {"rms_norm_eps", f.get_float(p + "attention.layer_norm_rms_epsilon", 1e-6)},
          {"rope_theta", f.get_float(p + "rope.freq_base", 10000.0)}, {"tie_word_embeddings", z.tied},
          {"attention_dropout", 0.0}};
}

// llama permutes Q and K rows to its adjacent-pair RoPE; qwen2 keeps Hugging Face's order
// (NeoX-style RoPE) and adds the q/k/v biases.
std::vector<GgufTensorName> gguf_tensors(const std::string& arch, const ModelConfig& c) {
  using N = GgufTensorName;
  const bool rope_rows = arch == kLlama, qkv_bias = arch == kQwen2;
  const auto q = rope_rows ? N::rope_q : N::none, k = rope_rows ? N::rope_k : N::none;
  std::vector<N> t{{"token_embd.weight", "model.embed_tokens.weight"}, {"output_norm.weight", "model.norm.weight"}};
  for (std::int64_t i = 0; i < c.n_layers; ++i) {
    const std::string p = layer_prefix("model.layers", i);
    t.push_back({gguf_block(i, "attn_norm.weight"), p + "input_layernorm.weight"});
    t.push_back({gguf_block(i, "attn_q.weight"), p + "self_attn.q_proj.weight", q});
    t.push_back({gguf_block(i, "attn_k.weight"), p + "self_attn.k_proj.weight", k});
    t.push_back({gguf_block(i, "attn_v.weight"), p + "self_attn.v_proj.weight"});
    if (qkv_bias) {
      t.push_back({gguf_block(i, "attn_q.bias"), p + "self_attn.q_proj.bias", q});
      t.push_back({gguf_block(i, "attn_k.bias"), p + "self_attn.k_proj.bias", k});
      t.push_back({gguf_block(i, "attn_v.bias"), p + "self_attn.v_proj.bias"});
    }
    t.push_back({gguf_block(i, "attn_output.weight"), p + "self_attn.o_proj.weight"});
    t.push_back({gguf_block(i, "ffn_norm.weight"), p + "post_attention_layernorm.weight"});
    t.push_back({gguf_block(i, "ffn_gate.weight"), p + "mlp.gate_proj.weight"});
    t.push_back({gguf_block(i, "ffn_up.weight"), p + "mlp.up_proj.weight"});
    t.push_back({gguf_block(i, "ffn_down.weight"), p + "mlp.down_proj.weight"});
  }
  if (!c.tie_embeddings) t.push_back({"output.weight", "lm_head.weight"});
  return t;
}

void gguf_metadata(const std::string& arch, const ModelConfig& c, const std::string& path,
                   std::vector<std::pair<std::string, GgufValue>>& meta) {
  TFM_CHECK(c.sliding_window == 0, path, "sliding-window attention is not written to GGUF");
  TFM_CHECK(arch == kQwen2 || !c.bias, path,
            "a llama model with attention biases (attention_bias) is not written to GGUF; Qwen2's q/k/v-only biases are");
  TFM_CHECK(c.activation == FfnActivation::swiglu && c.position == PositionKind::rope && c.rope_pairing == RopePairing::halves,
            path, "llama GGUF needs SwiGLU and rotate-half RoPE");
  const std::string p = arch + ".";
  auto u32 = [&](const std::string& k, std::int64_t v) { meta.emplace_back(p + k, GgufValue::u32(static_cast<std::uint32_t>(v))); };
  u32("attention.head_count_kv", c.kv_heads());
  u32("rope.dimension_count", c.dim_head());
  if (c.head_dim > 0 && c.head_dim != c.d_model / c.n_heads) {
    u32("attention.key_length", c.dim_head());
    u32("attention.value_length", c.dim_head());
  }
  meta.emplace_back(p + "rope.freq_base", GgufValue::f32(static_cast<float>(c.rope_base)));
  meta.emplace_back(p + "attention.layer_norm_rms_epsilon", GgufValue::f32(static_cast<float>(c.norm_eps)));
  u32("vocab_size", c.vocab_size);
}

// ---- the engine's scheme computing Llama ---------------------------------------------------------
bool computes_as_engine(const ModelConfig& c) {
  return engine_decoder_lm(c) && c.norm == NormKind::rms_norm && c.position == PositionKind::rope &&
         c.rope_pairing == RopePairing::halves && !c.bias && c.activation == FfnActivation::swiglu;
}

std::map<std::string, Tensor> from_engine(const ModelConfig& c, const std::map<std::string, Tensor>& p) {
  std::map<std::string, Tensor> hf;
  auto get = [&](const std::string& n) { return p.at(n); };
  for (std::int64_t i = 0; i < c.n_layers; ++i) {
    const std::string e = layer_prefix("decoder.layers", i), h = layer_prefix("model.layers", i);
    hf[h + "input_layernorm.weight"] = get(e + "self_attn_norm.weight");
    hf[h + "post_attention_layernorm.weight"] = get(e + "ffn_norm.weight");
    for (const char* n : {"q_proj", "k_proj", "v_proj", "o_proj"})
      hf[h + "self_attn." + n + ".weight"] = get(e + "self_attn." + n + ".weight");
    for (const char* n : {"gate_proj", "up_proj", "down_proj"}) hf[h + "mlp." + n + ".weight"] = get(e + "ffn." + n + ".weight");
  }
  hf["model.embed_tokens.weight"] = get("embed_tokens.weight");
  hf["model.norm.weight"] = get("decoder.norm.weight");
  if (!c.tie_embeddings) hf["lm_head.weight"] = get("lm_head.weight");
  return hf;
}

}  // namespace

Family llama_family(const std::string& type) {
  Family f;
  f.model_type = type;
  f.schema = schema(type);
  if (type == kLlama) f.presets = {{"llama", llama2_7b()}};
  f.parameters = parameters;
  f.wire = wire;
  f.hub_prefix = "model.";
  f.padded_embedding = "model.embed_tokens.weight";
  if (type == kLlama || type == kQwen2) {
    f.gguf = FamilyGguf{type,
                        [type](const GgufFile& g, const GgufSizes& z) { return gguf_config(type, g, z); },
                        [type](const ModelConfig& c) { return gguf_tensors(type, c); },
                        [type](const ModelConfig& c, const std::string& path, auto& meta) { gguf_metadata(type, c, path, meta); }};
  }
  if (type == kLlama) {
    f.computes_as_engine = computes_as_engine;
    f.from_engine = from_engine;
  }
  return f;
}

}  // namespace tfm
