// GGUF <-> the engine's llama and gpt2 models. Tensor names and layouts follow llama.cpp's
// convert_hf_to_gguf.py (the definition of what a llama.cpp GGUF holds):
//   llama: token_embd, output_norm, output, blk.N.{attn_norm, attn_q, attn_k, attn_v,
//          attn_output, ffn_norm, ffn_gate, ffn_up, ffn_down}; attn_q/attn_k rows permuted
//          per head from Hugging Face's rotate-half order to interleaved pairs, because
//          llama.cpp's llama architecture applies RoPE to adjacent dimensions.
//   qwen2: the same names plus attn_{q,k,v}.bias, no permutation (NeoX-style RoPE).
//   gpt2:  token_embd, position_embd, output_norm, output, blk.N.{attn_norm, attn_qkv,
//          attn_output, ffn_norm, ffn_up, ffn_down}; Hugging Face's Conv1D (in, out)
//          weights stored transposed, as (out, in) like every other linear.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "infer/gguf_tokenizer.h"
#include "tfm/error.h"
#include "tfm/gguf_model.h"
#include "tfm/ops.h"

namespace tfm {
namespace {

using json = nlohmann::json;

std::string blk(std::int64_t i, const char* name) { return "blk." + std::to_string(i) + "." + name; }
std::string hf(const char* prefix, std::int64_t i, const char* name) {
  return std::string(prefix) + "." + std::to_string(i) + "." + name;
}

// Rows of a Q or K projection (n_heads * head_dim, ...) between Hugging Face's order, where
// RoPE pairs dimension i with i + head_dim/2, and llama.cpp's, where it pairs 2i with 2i+1.
// to_gguf: gguf row h*D + 2i + j  <-  hf row h*D + j*D/2 + i (convert_hf_to_gguf's permute);
// otherwise the inverse.
// Whole rows move, so it works on any dtype (block-quantized rows included) byte-wise.
Tensor permute_rope_rows(const Tensor& w_in, std::int64_t n_heads, bool to_gguf) {
  const std::int64_t rows = w_in.size(0), D = rows / n_heads;
  TFM_CHECK(rows % n_heads == 0 && D % 2 == 0, "gguf", "cannot permute ", shape_str(w_in.shape()), " for ", n_heads,
            " heads");
  const Tensor w = w_in.is_contiguous() ? w_in : w_in.clone();
  const std::size_t row_bytes = w.nbytes() / static_cast<std::size_t>(rows);
  const auto* in = static_cast<const unsigned char*>(w.raw_data());
  Tensor out = Tensor::empty(w.shape(), w.dtype());
  auto* o = static_cast<unsigned char*>(out.raw_data());
  for (std::int64_t h = 0; h < n_heads; ++h)
    for (std::int64_t i = 0; i < D / 2; ++i)
      for (std::int64_t j = 0; j < 2; ++j) {
        const std::int64_t g = h * D + 2 * i + j, r = h * D + j * (D / 2) + i;
        const auto src = static_cast<std::size_t>(to_gguf ? r : g), dst = static_cast<std::size_t>(to_gguf ? g : r);
        std::memcpy(o + dst * row_bytes, in + src * row_bytes, row_bytes);
      }
  return out;
}

// A 2-D tensor stored in a type the engine holds natively (f16, bf16, q8_0, q4_0, q4_k,
// q6_k), copied out of the file in that type; f32 and other types come back as f32.
Tensor read_kept(const GgufFile& f, const GgufTensorInfo& t) {
  const auto d = dtype_of_ggml(t.type);
  if (!d || *d == DType::f32 || t.ne.size() != 2) return f.to_f32(t);
  Tensor out = Tensor::empty(t.shape(), *d);
  TFM_CHECK(out.nbytes() == t.nbytes, f.path, "tensor '", t.name, "': ", t.nbytes, " bytes for ", shape_str(t.shape()),
            " of ", dtype_name(*d));
  std::memcpy(out.raw_data(), f.raw(t), out.nbytes());
  return out;
}

Tensor transpose2d(const Tensor& w) { return contiguous(transpose(w, 0, 1)); }  // a fresh (out, in) copy
// Conv1D (in, out) of an (out, in) weight; compact weights stay (out, in) (their orientation).
Tensor conv1d(const Tensor& w) { return w.dtype() == DType::f32 ? transpose2d(w) : w; }
// Rows of same-typed 2-D tensors one after another (any dtype: rows are whole).
Tensor concat_rows(const std::vector<Tensor>& parts) {
  if (parts[0].dtype() == DType::f32) return concat(parts, 0);
  std::int64_t rows = 0;
  for (const auto& p : parts) {
    TFM_CHECK(p.dtype() == parts[0].dtype() && p.size(1) == parts[0].size(1), "gguf", "cannot fuse ", p.str(), " with ",
              parts[0].str(), " into GPT-2's attn_qkv (give q, k and v one type)");
    rows += p.size(0);
  }
  Tensor out = Tensor::empty({rows, parts[0].size(1)}, parts[0].dtype());
  auto* o = static_cast<unsigned char*>(out.raw_data());
  for (const auto& p : parts) {
    const Tensor c = p.is_contiguous() ? p : p.clone();
    std::memcpy(o, c.raw_data(), c.nbytes());
    o += c.nbytes();
  }
  return out;
}

struct Names {
  std::string gguf, hf;
  enum Fix { none, rope_q, rope_k, transpose } fix = none;
};

// The GGUF <-> Hugging Face name table of one family (arch: llama, qwen2 or gpt2).
std::vector<Names> name_table(const std::string& arch, std::int64_t layers, bool tied, bool qkv_bias) {
  std::vector<Names> t;
  if (arch == "gpt2") {
    t = {{"token_embd.weight", "transformer.wte.weight"}, {"position_embd.weight", "transformer.wpe.weight"},
         {"output_norm.weight", "transformer.ln_f.weight"}, {"output_norm.bias", "transformer.ln_f.bias"}};
    for (std::int64_t i = 0; i < layers; ++i) {
      const char* p = "transformer.h";
      t.push_back({blk(i, "attn_norm.weight"), hf(p, i, "ln_1.weight")});
      t.push_back({blk(i, "attn_norm.bias"), hf(p, i, "ln_1.bias")});
      t.push_back({blk(i, "attn_qkv.weight"), hf(p, i, "attn.c_attn.weight"), Names::transpose});
      t.push_back({blk(i, "attn_qkv.bias"), hf(p, i, "attn.c_attn.bias")});
      t.push_back({blk(i, "attn_output.weight"), hf(p, i, "attn.c_proj.weight"), Names::transpose});
      t.push_back({blk(i, "attn_output.bias"), hf(p, i, "attn.c_proj.bias")});
      t.push_back({blk(i, "ffn_norm.weight"), hf(p, i, "ln_2.weight")});
      t.push_back({blk(i, "ffn_norm.bias"), hf(p, i, "ln_2.bias")});
      t.push_back({blk(i, "ffn_up.weight"), hf(p, i, "mlp.c_fc.weight"), Names::transpose});
      t.push_back({blk(i, "ffn_up.bias"), hf(p, i, "mlp.c_fc.bias")});
      t.push_back({blk(i, "ffn_down.weight"), hf(p, i, "mlp.c_proj.weight"), Names::transpose});
      t.push_back({blk(i, "ffn_down.bias"), hf(p, i, "mlp.c_proj.bias")});
    }
  } else {
    const bool rope_rows = arch == "llama";  // qwen2 keeps Hugging Face's order
    const auto q = rope_rows ? Names::rope_q : Names::none, k = rope_rows ? Names::rope_k : Names::none;
    t = {{"token_embd.weight", "model.embed_tokens.weight"}, {"output_norm.weight", "model.norm.weight"}};
    for (std::int64_t i = 0; i < layers; ++i) {
      const char* p = "model.layers";
      t.push_back({blk(i, "attn_norm.weight"), hf(p, i, "input_layernorm.weight")});
      t.push_back({blk(i, "attn_q.weight"), hf(p, i, "self_attn.q_proj.weight"), q});
      t.push_back({blk(i, "attn_k.weight"), hf(p, i, "self_attn.k_proj.weight"), k});
      t.push_back({blk(i, "attn_v.weight"), hf(p, i, "self_attn.v_proj.weight")});
      if (qkv_bias) {
        t.push_back({blk(i, "attn_q.bias"), hf(p, i, "self_attn.q_proj.bias"), q});
        t.push_back({blk(i, "attn_k.bias"), hf(p, i, "self_attn.k_proj.bias"), k});
        t.push_back({blk(i, "attn_v.bias"), hf(p, i, "self_attn.v_proj.bias")});
      }
      t.push_back({blk(i, "attn_output.weight"), hf(p, i, "self_attn.o_proj.weight")});
      t.push_back({blk(i, "ffn_norm.weight"), hf(p, i, "post_attention_layernorm.weight")});
      t.push_back({blk(i, "ffn_gate.weight"), hf(p, i, "mlp.gate_proj.weight")});
      t.push_back({blk(i, "ffn_up.weight"), hf(p, i, "mlp.up_proj.weight")});
      t.push_back({blk(i, "ffn_down.weight"), hf(p, i, "mlp.down_proj.weight")});
    }
  }
  if (!tied) t.push_back({"output.weight", "lm_head.weight"});
  return t;
}

// ---- reading ---------------------------------------------------------------------------------
ModelConfig config_from_gguf(const GgufFile& f, const std::string& arch, bool tied, std::int64_t vocab) {
  const std::string p = arch + ".";
  auto need = [&](const std::string& key) {
    const std::int64_t v = f.get_int(p + key);
    TFM_CHECK(v > 0, f.path, "key '", p, key, "' = ", v, " must be positive");
    return v;
  };
  const std::int64_t C = need("embedding_length"), L = need("block_count"), H = need("attention.head_count");
  const std::int64_t F = need("feed_forward_length"), ctx = need("context_length");
  json j;
  if (arch == "gpt2") {
    j = {{"model_type", "gpt2"}, {"vocab_size", vocab}, {"n_embd", C}, {"n_layer", L}, {"n_head", H},
         {"n_positions", ctx}, {"n_inner", F}, {"activation_function", "gelu_new"},
         {"layer_norm_epsilon", f.get_float(p + "attention.layer_norm_epsilon", 1e-5)},
         {"resid_pdrop", 0.0}, {"attn_pdrop", 0.0}, {"embd_pdrop", 0.0}, {"tie_word_embeddings", tied}};
  } else {
    const std::int64_t kv = f.get_int(p + "attention.head_count_kv", H);
    const std::int64_t head_dim = f.get_int(p + "attention.key_length", C / H);
    TFM_CHECK(f.get_int(p + "attention.value_length", head_dim) == head_dim, f.path, "key '", p,
              "attention.value_length' differs from the key length (not supported)");
    const std::int64_t rope_dims = f.get_int(p + "rope.dimension_count", head_dim);
    TFM_CHECK(rope_dims == head_dim, f.path, "key '", p, "rope.dimension_count' = ", rope_dims,
              ": partial rotary embeddings are not supported (head_dim ", head_dim, ")");
    const std::string scaling = f.get_string(p + "rope.scaling.type", "none");
    TFM_CHECK(scaling == "none", f.path, "key '", p, "rope.scaling.type' = '", scaling,
              "': RoPE scaling is not supported");
    TFM_CHECK(f.get_int(p + "expert_count", 0) == 0, f.path, "key '", p, "expert_count': mixture-of-experts models are not supported");
    // qwen2: Hugging Face's Qwen2 family (q/k/v biases only); llama: no biases.
    j = {{"model_type", arch == "qwen2" ? "qwen2" : "llama"}, {"vocab_size", vocab}, {"hidden_size", C}, {"intermediate_size", F},
         {"num_hidden_layers", L}, {"num_attention_heads", H}, {"num_key_value_heads", kv}, {"head_dim", head_dim},
         {"max_position_embeddings", ctx}, {"rms_norm_eps", f.get_float(p + "attention.layer_norm_rms_epsilon", 1e-6)},
         {"rope_theta", f.get_float(p + "rope.freq_base", 10000.0)}, {"tie_word_embeddings", tied},
         {"attention_dropout", 0.0}};
  }
  const std::int64_t bos = f.get_int("tokenizer.ggml.bos_token_id", -1), eos = f.get_int("tokenizer.ggml.eos_token_id", -1);
  if (bos >= 0) j["bos_token_id"] = bos;
  if (eos >= 0) j["eos_token_id"] = eos;
  return parse_model_config(j.dump(), f.path);
}


// ---- the engine's own scheme ("transformer") -------------------------------------------------
// A decoder-only model in the engine's scheme that computes exactly what Hugging Face's GPT-2
// or Llama computes is written under that family's names. Returns the family ("" when the
// model is neither) and fills `hf` with the renamed tensors.
std::string engine_family(const ModelConfig& c) {
  const bool common = c.architecture == Architecture::decoder_only && c.head == HeadKind::lm &&
                      c.norm_placement == NormPlacement::pre && c.final_norm && !c.embedding_norm &&
                      !c.scale_embeddings && c.scale_attention_scores && c.sliding_window == 0 &&
                      c.type_vocab_size == 0 && c.dim_head() * c.n_heads == c.d_model;
  if (common && c.norm == NormKind::layer_norm && c.position == PositionKind::learned && c.bias &&
      c.activation == FfnActivation::gelu_tanh && c.kv_heads() == c.n_heads)
    return "gpt2";
  if (common && c.norm == NormKind::rms_norm && c.position == PositionKind::rope &&
      c.rope_pairing == RopePairing::halves && !c.bias && c.activation == FfnActivation::swiglu)
    return "llama";
  return "";
}

std::map<std::string, Tensor> engine_to_hf(const ModelConfig& c, const std::string& family,
                                           const std::map<std::string, Tensor>& p) {
  std::map<std::string, Tensor> hf;
  auto get = [&](const std::string& n) { return p.at(n); };
  for (std::int64_t i = 0; i < c.n_layers; ++i) {
    const std::string e = "decoder.layers." + std::to_string(i) + ".";
    if (family == "gpt2") {
      const std::string h = "transformer.h." + std::to_string(i) + ".";
      for (const char* w : {"weight", "bias"}) {
        hf[h + "ln_1." + w] = get(e + "self_attn_norm." + w);
        hf[h + "ln_2." + w] = get(e + "ffn_norm." + w);
      }
      // Conv1D (in, out): the fused c_attn is [Wq; Wk; Wv] transposed.
      hf[h + "attn.c_attn.weight"] = conv1d(concat_rows({get(e + "self_attn.q_proj.weight"), get(e + "self_attn.k_proj.weight"),
                                                         get(e + "self_attn.v_proj.weight")}));
      hf[h + "attn.c_attn.bias"] = concat({get(e + "self_attn.q_proj.bias"), get(e + "self_attn.k_proj.bias"),
                                           get(e + "self_attn.v_proj.bias")}, 0);
      hf[h + "attn.c_proj.weight"] = conv1d(get(e + "self_attn.o_proj.weight"));
      hf[h + "attn.c_proj.bias"] = get(e + "self_attn.o_proj.bias");
      hf[h + "mlp.c_fc.weight"] = conv1d(get(e + "ffn.up_proj.weight"));
      hf[h + "mlp.c_fc.bias"] = get(e + "ffn.up_proj.bias");
      hf[h + "mlp.c_proj.weight"] = conv1d(get(e + "ffn.down_proj.weight"));
      hf[h + "mlp.c_proj.bias"] = get(e + "ffn.down_proj.bias");
    } else {
      const std::string h = "model.layers." + std::to_string(i) + ".";
      hf[h + "input_layernorm.weight"] = get(e + "self_attn_norm.weight");
      hf[h + "post_attention_layernorm.weight"] = get(e + "ffn_norm.weight");
      for (const char* n : {"q_proj", "k_proj", "v_proj", "o_proj"})
        hf[h + "self_attn." + n + ".weight"] = get(e + "self_attn." + n + ".weight");
      for (const char* n : {"gate_proj", "up_proj", "down_proj"})
        hf[h + "mlp." + n + ".weight"] = get(e + "ffn." + n + ".weight");
    }
  }
  const std::string embd = family == "gpt2" ? "transformer.wte.weight" : "model.embed_tokens.weight";
  hf[embd] = get("embed_tokens.weight");
  if (family == "gpt2") {
    hf["transformer.wpe.weight"] = get("embed_positions.weight");
    hf["transformer.ln_f.weight"] = get("decoder.norm.weight");
    hf["transformer.ln_f.bias"] = get("decoder.norm.bias");
  } else {
    hf["model.norm.weight"] = get("decoder.norm.weight");
  }
  if (!c.tie_embeddings) hf["lm_head.weight"] = get("lm_head.weight");
  return hf;
}

}  // namespace

bool is_gguf_path(const std::string& path) {
  const std::string ext = std::filesystem::path(path).extension().string();
  return ext == ".gguf" || ext == ".GGUF";
}

ModelConfig gguf_model_config(const GgufFile& f, GgufModelInfo* info) {
  const std::string arch = f.get_string("general.architecture");
  TFM_CHECK(arch == "llama" || arch == "qwen2" || arch == "gpt2", f.path, "key 'general.architecture': '", arch,
            "' is not supported (llama, qwen2, gpt2)");
  const GgufTensorInfo* embd = f.find_tensor("token_embd.weight");
  TFM_CHECK(embd != nullptr && embd->ne.size() == 2, f.path, "tensor 'token_embd.weight' (2-D) is missing");
  const bool tied = f.find_tensor("output.weight") == nullptr;
  if (info) {
    info->architecture = arch;
    info->name = f.get_string("general.name", "");
    info->chat_template = f.get_string("tokenizer.chat_template", "");
    info->tokenizer_model = f.get_string("tokenizer.ggml.model", "");
    info->tokenizer_pre = f.get_string("tokenizer.ggml.pre", "");
  }
  return config_from_gguf(f, arch, tied, embd->ne[1]);
}

LoadedModel gguf_to_model(const GgufFile& f, GgufModelInfo* info) {
  ModelConfig cfg = gguf_model_config(f, info);
  const std::string arch = f.get_string("general.architecture");
  const bool tied = cfg.tie_embeddings;
  const auto table = name_table(arch, cfg.n_layers, tied, arch == "qwen2");
  std::map<std::string, const Names*> by_gguf;
  for (const auto& n : table) by_gguf[n.gguf] = &n;
  std::map<std::string, Shape> expected;  // Hugging Face name -> shape the metadata implies
  for (const auto& spec : parameter_specs(cfg)) expected[spec.name] = spec.shape;
  for (const auto& n : table)
    TFM_CHECK(f.find_tensor(n.gguf) != nullptr, f.path, "tensor '", n.gguf, "' is missing (", arch, ", ",
              cfg.n_layers, " layers)");
  std::map<std::string, Tensor> params;
  for (const auto& t : f.tensors) {
    auto it = by_gguf.find(t.name);
    TFM_CHECK(it != by_gguf.end(), f.path, "tensor '", t.name, "' is not part of a ", arch, " model with ",
              cfg.n_layers, " layers", tied ? " (tied embeddings)" : "");
    const Names& n = *it->second;
    Shape want = expected.at(n.hf);
    if (n.fix == Names::transpose) std::reverse(want.begin(), want.end());
    TFM_CHECK(t.shape() == want, f.path, "tensor '", t.name, "' has shape ", shape_str(t.shape()),
              ", the metadata implies ", shape_str(want));
    Tensor w = read_kept(f, t);
    f.release(t);
    if (n.fix == Names::rope_q) w = permute_rope_rows(w, cfg.n_heads, false);
    if (n.fix == Names::rope_k) w = permute_rope_rows(w, cfg.kv_heads(), false);
    if (n.fix == Names::transpose) {
      TFM_CHECK(w.dim() == 2, f.path, "tensor '", t.name, "' must be 2-D");
      // Compact types stay (out, in), the engine's orientation for them.
      if (w.dtype() == DType::f32) w = transpose2d(w);
    }
    params[n.hf] = std::move(w);
  }
  Model model = [&] {
    try {
      return Model::from_parameters(cfg, std::move(params), /*keep_compact=*/true);
    } catch (const Error& e) {
      fail(f.path, "tensors do not match the metadata: ", e.what());
    }
  }();
  Tokenizer tok = [&] {
    try {
      return Tokenizer::from_json(gguf_tokenizer_json(f));
    } catch (const Error& e) {
      fail(f.path, "tokenizer from the tokenizer.ggml.* metadata: ", e.what());
    }
  }();
  TFM_CHECK(tok.vocab_size() <= cfg.vocab_size, f.path, "tokenizer has ", tok.vocab_size(),
            " tokens but token_embd has ", cfg.vocab_size, " rows");
  return {std::move(cfg), std::move(model), std::move(tok)};
}

LoadedModel load_gguf_model(const std::string& path, GgufModelInfo* info) { return gguf_to_model(read_gguf(path), info); }

// ---- writing ---------------------------------------------------------------------------------
void save_gguf_model(const std::string& path, const Model& model, const Tokenizer& tokenizer,
                     const GgufSaveOptions& opt) {
  ModelConfig c = model.config();
  TFM_CHECK(c.architecture == Architecture::decoder_only && c.head == HeadKind::lm, path,
            "only decoder-only language models can be written to GGUF");
  std::map<std::string, Tensor> renamed;  // engine-scheme models, under the family's names
  if (c.model_type == "transformer") {
    const std::string family = engine_family(c);
    TFM_CHECK(!family.empty(), path,
              "this model's components match neither GPT-2 (pre-LayerNorm, learned positions, tanh GELU, biases) nor "
              "Llama (pre-RMSNorm, rotate-half RoPE, SwiGLU, no biases), the families llama.cpp runs");
    renamed = engine_to_hf(c, family, model.parameters());
    c.model_type = family;
  }
  std::string arch;
  if (c.model_type == "gpt2") {
    arch = "gpt2";
  } else if (c.model_type == "llama" || c.model_type == "qwen2") {
    TFM_CHECK(c.sliding_window == 0, path, "sliding-window attention is not written to GGUF");
    TFM_CHECK(c.model_type == "qwen2" || !c.bias, path,
              "a llama model with attention biases (attention_bias) is not written to GGUF; Qwen2's q/k/v-only biases are");
    arch = c.model_type;
  } else {
    fail(path, "model_type '", c.model_type, "' cannot be written to GGUF (llama, gpt2 and equivalent \"transformer\" models can)");
  }
  const std::string p = arch + ".";
  std::vector<std::pair<std::string, GgufValue>> meta;
  meta.emplace_back("general.architecture", GgufValue::string(arch));
  if (!opt.name.empty()) meta.emplace_back("general.name", GgufValue::string(opt.name));
  // llama_ftype: ALL_F32 0, MOSTLY_F16 1, MOSTLY_Q4_0 2, MOSTLY_Q8_0 7, MOSTLY_Q6_K 18,
  // MOSTLY_Q4_K_M 15, MOSTLY_BF16 32.
  GgmlType ft = opt.type;
  {
    std::map<DType, int> compact;  // the model's compact matrices by type
    for (const auto& [name, t] : model.parameters())
      if (t.dtype() != DType::f32) ++compact[t.dtype()];
    int most = 0;
    for (const auto& [d, n] : compact)
      if (n > most) most = n, ft = ggml_type_of(d);
  }
  const std::uint32_t ftype = ft == GgmlType::f16 ? 1 : ft == GgmlType::q8_0 ? 7 : ft == GgmlType::bf16 ? 32
                              : ft == GgmlType::q4_0 ? 2 : ft == GgmlType::q4_k ? 15 : ft == GgmlType::q6_k ? 18 : 0;
  meta.emplace_back("general.file_type", GgufValue::u32(ftype));
  if (ft != GgmlType::f32 && ft != GgmlType::f16 && ft != GgmlType::bf16)
    meta.emplace_back("general.quantization_version", GgufValue::u32(2));
  auto u32 = [&](const std::string& k, std::int64_t v) { meta.emplace_back(p + k, GgufValue::u32(static_cast<std::uint32_t>(v))); };
  u32("context_length", c.max_positions);
  u32("embedding_length", c.d_model);
  u32("block_count", c.n_layers);
  u32("feed_forward_length", c.d_ff);
  u32("attention.head_count", c.n_heads);
  if (arch == "gpt2") {
    TFM_CHECK(c.activation == FfnActivation::gelu_tanh, path, "gpt2 in llama.cpp uses the tanh GELU; this model's activation is ",
              to_string(c.activation));
    meta.emplace_back(p + "attention.layer_norm_epsilon", GgufValue::f32(static_cast<float>(c.norm_eps)));
  } else {
    TFM_CHECK(c.activation == FfnActivation::swiglu && c.position == PositionKind::rope &&
                  c.rope_pairing == RopePairing::halves,
              path, "llama GGUF needs SwiGLU and rotate-half RoPE");
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
  tokenizer_to_gguf(tokenizer, meta, c.vocab_size);
  if (!opt.chat_template.empty()) meta.emplace_back("tokenizer.chat_template", GgufValue::string(opt.chat_template));

  const auto& params = renamed.empty() ? model.parameters() : renamed;
  std::vector<GgufTensorOut> out;
  for (const auto& n : name_table(arch, c.n_layers, c.tie_embeddings, arch == "qwen2")) {
    auto it = params.find(n.hf);
    TFM_CHECK(it != params.end(), path, "model has no tensor '", n.hf, "'");
    Tensor w = it->second;
    if (n.fix == Names::rope_q) w = permute_rope_rows(w, c.n_heads, true);
    if (n.fix == Names::rope_k) w = permute_rope_rows(w, c.kv_heads(), true);
    // Compact weights are already (out, in); f32 Conv1D ones are (in, out).
    if (n.fix == Names::transpose && w.dtype() == DType::f32) w = transpose2d(w);
    GgmlType type = w.dim() >= 2 ? opt.type : GgmlType::f32;
    // A weight the model holds in a compact type is written in that type (tfm quantize's
    // per-tensor recipe); otherwise opt.type, falling back to F16 when a row does not fit
    // the block, like llama.cpp's converter.
    if (w.dtype() != DType::f32) type = ggml_type_of(w.dtype());
    if (type == GgmlType::q8_0 && w.size(-1) % 32 != 0) type = GgmlType::f16;
    out.push_back({n.gguf, w, type});
  }
  write_gguf(path, meta, out);
}

}  // namespace tfm
