// Wiring modules to parameters, family by family (names as in parameter_specs).
#include "models/layout.h"

#include <array>
#include <cmath>

#include "tfm/error.h"

namespace tfm {
namespace {

class Params {
 public:
  Params(const std::map<std::string, Tensor>& p, const LoraWiring& lora, std::map<std::string, bool>* linears)
      : p_(p), lora_(lora), linears_(linears) {}
  Tensor need(const std::string& name) const {
    auto it = p_.find(name);
    TFM_CHECK(it != p_.end(), "model", "missing parameter '", name, "'");
    return it->second;
  }
  Tensor maybe(const std::string& name) const {
    auto it = p_.find(name);
    return it == p_.end() ? Tensor() : it->second;
  }
  nn::Linear linear(const std::string& name, bool in_out = false) const {
    nn::Linear l;
    l.weight = need(name + ".weight");
    l.bias = maybe(name + ".bias");
    l.in_out = in_out;
    (*linears_)[name] = in_out;
    l.lora_a = maybe(name + ".lora_A.weight");
    if (l.lora_a.defined()) {
      l.lora_b = need(name + ".lora_B.weight");
      l.lora_scale = lora_.scale;
      l.lora_dropout = lora_.dropout;
    }
    return l;
  }
  nn::Bottleneck bottleneck(const std::string& name) const {
    nn::Bottleneck b;
    b.activation = lora_.bottleneck;
    if (p_.count(name + ".adapter_down.weight") == 0) return b;
    b.down.weight = need(name + ".adapter_down.weight");
    b.down.bias = need(name + ".adapter_down.bias");
    b.up.weight = need(name + ".adapter_up.weight");
    b.up.bias = need(name + ".adapter_up.bias");
    return b;
  }
  nn::Norm norm(const std::string& name, const ModelConfig& c) const {
    return nn::Norm{c.norm, need(name + ".weight"), maybe(name + ".bias"), c.norm_eps};
  }

 private:
  const std::map<std::string, Tensor>& p_;
  LoraWiring lora_;
  std::map<std::string, bool>* linears_;
};

std::string at(const std::string& prefix, std::size_t i) { return prefix + "." + std::to_string(i) + "."; }

nn::Attention attention_shape(const ModelConfig& c) {
  nn::Attention a;
  a.n_heads = c.n_heads;
  a.n_kv_heads = c.kv_heads();
  a.head_dim = c.dim_head();
  return a;
}

// An attention block whose four projections are `prefix` + the family's names for them.
nn::Attention attention(const Params& P, const ModelConfig& c, const std::string& prefix,
                        const std::array<const char*, 4>& qkvo) {
  nn::Attention a = attention_shape(c);
  a.q_proj = P.linear(prefix + qkvo[0]);
  a.k_proj = P.linear(prefix + qkvo[1]);
  a.v_proj = P.linear(prefix + qkvo[2]);
  a.o_proj = P.linear(prefix + qkvo[3]);
  return a;
}
constexpr std::array<const char*, 4> kEngineNames{"q_proj", "k_proj", "v_proj", "o_proj"};

nn::FeedForward ffn_shape(const ModelConfig& c) {
  nn::FeedForward f;
  f.activation = c.activation;
  f.glu_gelu_tanh = c.model_type == "t5";  // T5 v1.1's "gated-gelu" is gelu_new
  f.dropout = c.model_type == "t5" ? c.dropout : 0.0;  // T5 drops the FFN's hidden units too
  return f;
}

// ---- the engine's scheme (also vaswani) ---------------------------------------------------
void wire_engine_stack(Stack& s, const std::string& name, std::int64_t n, bool cross, const ModelConfig& c,
                       const Params& P) {
  s.relative_bias = P.maybe(name + ".relative_attention_bias.weight");
  for (std::size_t i = 0; i < static_cast<std::size_t>(n); ++i) {
    const std::string p = at(name + ".layers", i);
    Layer L;
    L.name = p;
    L.self_norm = P.norm(p + "self_attn_norm", c);
    L.self_attn = attention(P, c, p + "self_attn.", kEngineNames);
    if (cross) {
      L.cross_norm = P.norm(p + "cross_attn_norm", c);
      L.cross_attn = attention(P, c, p + "cross_attn.", kEngineNames);
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

void wire_engine(Layout& l, const ModelConfig& c, const Params& P) {
  l.tok_emb = P.need("embed_tokens.weight");
  l.pos_emb = P.maybe("embed_positions.weight");
  l.type_emb = P.maybe("embed_token_types.weight");
  l.has_embed_norm = c.embedding_norm;
  if (c.embedding_norm) l.embed_norm = P.norm("embed_norm", c);
  if (c.architecture != Architecture::decoder_only) wire_engine_stack(l.encoder, "encoder", c.n_layers, false, c, P);
  if (c.architecture == Architecture::decoder_only) wire_engine_stack(l.decoder, "decoder", c.n_layers, false, c, P);
  if (c.architecture == Architecture::encoder_decoder)
    wire_engine_stack(l.decoder, "decoder", c.decoder_layers(), true, c, P);
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

// ---- Hugging Face families -----------------------------------------------------------------
void wire_gpt2(Layout& l, const ModelConfig& c, const Params& P) {
  l.tok_emb = P.need("transformer.wte.weight");
  l.pos_emb = P.need("transformer.wpe.weight");
  for (std::size_t i = 0; i < static_cast<std::size_t>(c.n_layers); ++i) {
    const std::string p = at("transformer.h", i);
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

void wire_llama(Layout& l, const ModelConfig& c, const Params& P) {
  l.tok_emb = P.need("model.embed_tokens.weight");
  for (std::size_t i = 0; i < static_cast<std::size_t>(c.n_layers); ++i) {
    const std::string p = at("model.layers", i);
    Layer L;
    L.name = p;
    L.self_norm = P.norm(p + "input_layernorm", c);
    L.self_attn = attention(P, c, p + "self_attn.", kEngineNames);
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

void wire_bert(Layout& l, const ModelConfig& c, const Params& P) {
  l.tok_emb = P.need("bert.embeddings.word_embeddings.weight");
  l.pos_emb = P.need("bert.embeddings.position_embeddings.weight");
  l.type_emb = P.maybe("bert.embeddings.token_type_embeddings.weight");
  l.has_embed_norm = true;
  l.embed_norm = P.norm("bert.embeddings.LayerNorm", c);
  for (std::size_t i = 0; i < static_cast<std::size_t>(c.n_layers); ++i) {
    const std::string p = at("bert.encoder.layer", i);
    Layer L;
    L.name = p;
    L.self_attn = attention(P, c, p + "attention.", {"self.query", "self.key", "self.value", "output.dense"});
    L.self_norm = P.norm(p + "attention.output.LayerNorm", c);
    L.ffn = ffn_shape(c);
    L.ffn.up = P.linear(p + "intermediate.dense");
    L.ffn.down = P.linear(p + "output.dense");
    L.ffn_norm = P.norm(p + "output.LayerNorm", c);
    l.encoder.layers.push_back(L);
  }
  if (c.head == HeadKind::classifier) {
    l.pooler = P.linear("bert.pooler.dense");
    l.classifier = P.linear("classifier");
  } else if (c.head == HeadKind::masked_lm) {
    l.mlm_dense = P.linear("cls.predictions.transform.dense");
    l.mlm_norm = P.norm("cls.predictions.transform.LayerNorm", c);
    l.mlm_decoder = l.tok_emb;
    l.mlm_bias = P.need("cls.predictions.bias");
  }
}

// MarianMTModel (BART's layout): post-norm layers, fc1/fc2, no final norms, the shared
// embedding for both stacks and the tied head, plus final_logits_bias.
void wire_marian(Layout& l, const ModelConfig& c, const Params& P) {
  constexpr std::array<const char*, 4> names{"q_proj", "k_proj", "v_proj", "out_proj"};
  l.tok_emb = P.need("model.shared.weight");
  for (const char* side : {"encoder", "decoder"}) {
    const bool dec = std::string(side) == "decoder";
    Stack& s = dec ? l.decoder : l.encoder;
    const std::size_t n = static_cast<std::size_t>(dec ? c.decoder_layers() : c.n_layers);
    for (std::size_t i = 0; i < n; ++i) {
      const std::string p = at("model." + std::string(side) + ".layers", i);
      Layer L;
      L.name = p;
      L.self_attn = attention(P, c, p + "self_attn.", names);
      L.self_norm = P.norm(p + "self_attn_layer_norm", c);
      if (dec) {
        L.cross_attn = attention(P, c, p + "encoder_attn.", names);
        L.cross_norm = P.norm(p + "encoder_attn_layer_norm", c);
      }
      L.ffn = ffn_shape(c);
      L.ffn.up = P.linear(p + "fc1");
      L.ffn.down = P.linear(p + "fc2");
      L.ffn_norm = P.norm(p + "final_layer_norm", c);
      s.layers.push_back(L);
    }
  }
  l.lm_head = c.tie_embeddings ? l.tok_emb : P.need("lm_head.weight");
  l.logits_bias = P.need("final_logits_bias");
}

constexpr std::array<const char*, 4> kT5Names{"q", "k", "v", "o"};

void wire_t5(Layout& l, const ModelConfig& c, const Params& P) {
  l.tok_emb = P.need("shared.weight");
  for (const char* side : {"encoder", "decoder"}) {
    const bool dec = std::string(side) == "decoder";
    Stack& s = dec ? l.decoder : l.encoder;
    const std::size_t n = static_cast<std::size_t>(dec ? c.decoder_layers() : c.n_layers);
    s.relative_bias = P.need(std::string(side) + ".block.0.layer.0.SelfAttention.relative_attention_bias.weight");
    for (std::size_t i = 0; i < n; ++i) {
      const std::string p = at(std::string(side) + ".block", i);
      Layer L;
      L.name = p;
      L.self_norm = P.norm(p + "layer.0.layer_norm", c);
      L.self_attn = attention(P, c, p + "layer.0.SelfAttention.", kT5Names);
      if (dec) {
        L.cross_norm = P.norm(p + "layer.1.layer_norm", c);
        L.cross_attn = attention(P, c, p + "layer.1.EncDecAttention.", kT5Names);
      }
      const std::string f = p + (dec ? "layer.2." : "layer.1.");
      L.ffn_norm = P.norm(f + "layer_norm", c);
      L.ffn = ffn_shape(c);
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
  }
  l.lm_head = c.tie_embeddings ? l.tok_emb : P.need("lm_head.weight");
  if (c.tie_embeddings) l.lm_scale = 1.0 / std::sqrt(static_cast<double>(c.d_model));
}

}  // namespace

Layout wire_layout(const ModelConfig& c, const std::map<std::string, Tensor>& params, const LoraWiring& lora) {
  std::map<std::string, bool> linears;
  const Params P(params, lora, &linears);
  Layout l;
  if (c.model_type == "gpt2") wire_gpt2(l, c, P);
  else if (uses_llama_layout(c)) wire_llama(l, c, P);
  else if (c.model_type == "bert") wire_bert(l, c, P);
  else if (c.model_type == "t5") wire_t5(l, c, P);
  else if (c.model_type == "marian") wire_marian(l, c, P);
  else wire_engine(l, c, P);
  for (Stack* s : {&l.encoder, &l.decoder})
    for (std::size_t i = 0; i < s->layers.size(); ++i) {
      Layer& L = s->layers[i];
      L.self_attn.layer = L.cross_attn.layer = static_cast<std::int64_t>(i);
      L.attn_adapter = P.bottleneck(L.name + "attention_adapter");
      L.ffn_adapter = P.bottleneck(L.name + "output_adapter");
    }
  l.linear_modules = std::move(linears);
  return l;
}

}  // namespace tfm
