// The checkpoint names and shapes of every parameter, per family. For gpt2/llama/bert/t5 the
// names and layouts are those of the Hugging Face models (GPT-2's Conv1D weights are stored
// (in, out); everything else is nn.Linear's (out, in)). The engine's own scheme ("transformer")
// is documented in docs/design.md.
#include <string>

#include "tfm/model_config.h"

namespace tfm {
namespace {

using Specs = std::vector<ParamSpec>;

std::string at(const std::string& prefix, std::int64_t i) { return prefix + "." + std::to_string(i) + "."; }

void linear(Specs& s, const std::string& name, std::int64_t out, std::int64_t in, bool bias) {
  s.push_back({name + ".weight", {out, in}});
  if (bias) s.push_back({name + ".bias", {out}});
}

void norm(Specs& s, const std::string& name, const ModelConfig& c) {
  if (c.norm == NormKind::scale_norm) {
    s.push_back({name + ".weight", {1}});  // ScaleNorm's single learned scale g
    return;
  }
  s.push_back({name + ".weight", {c.d_model}});
  if (c.norm == NormKind::layer_norm) s.push_back({name + ".bias", {c.d_model}});
}

// ---- the engine's own scheme -------------------------------------------------------------
void attention(Specs& s, const std::string& p, const ModelConfig& c) {
  const std::int64_t q = c.n_heads * c.dim_head(), kv = c.kv_heads() * c.dim_head();
  linear(s, p + "q_proj", q, c.d_model, c.bias || c.qkv_bias);
  linear(s, p + "k_proj", kv, c.d_model, c.bias || c.qkv_bias);
  linear(s, p + "v_proj", kv, c.d_model, c.bias || c.qkv_bias);
  linear(s, p + "o_proj", c.d_model, q, c.bias);
}

void ffn(Specs& s, const std::string& p, const ModelConfig& c) {
  if (c.gated_ffn()) linear(s, p + "gate_proj", c.d_ff, c.d_model, c.bias);
  linear(s, p + "up_proj", c.d_ff, c.d_model, c.bias);
  linear(s, p + "down_proj", c.d_model, c.d_ff, c.bias);
}

void stack(Specs& s, const std::string& name, std::int64_t layers, bool cross, const ModelConfig& c) {
  if (c.position == PositionKind::t5_relative)
    s.push_back({name + ".relative_attention_bias.weight", {c.relative_buckets, c.n_heads}});
  for (std::int64_t i = 0; i < layers; ++i) {
    const std::string p = at(name + ".layers", i);
    norm(s, p + "self_attn_norm", c);
    attention(s, p + "self_attn.", c);
    if (cross) {
      norm(s, p + "cross_attn_norm", c);
      attention(s, p + "cross_attn.", c);
    }
    norm(s, p + "ffn_norm", c);
    ffn(s, p + "ffn.", c);
  }
  if (c.final_norm) norm(s, name + ".norm", c);
}

void heads(Specs& s, const ModelConfig& c) {
  switch (c.head) {
    case HeadKind::lm:
      if (!c.tie_embeddings) s.push_back({"lm_head.weight", {c.vocab_size, c.d_model}});
      if (c.logits_bias) s.push_back({"final_logits_bias", {1, c.vocab_size}});
      break;
    case HeadKind::classifier:
      linear(s, "classifier", c.num_labels, c.d_model, true);
      break;
    case HeadKind::masked_lm:
      linear(s, "mlm_head.dense", c.d_model, c.d_model, true);
      s.push_back({"mlm_head.norm.weight", {c.d_model}});
      s.push_back({"mlm_head.norm.bias", {c.d_model}});
      if (!c.tie_embeddings) s.push_back({"mlm_head.decoder.weight", {c.vocab_size, c.d_model}});
      s.push_back({"mlm_head.bias", {c.vocab_size}});
      break;
    case HeadKind::none:
      break;
  }
}

Specs engine_specs(const ModelConfig& c) {
  Specs s;
  s.push_back({"embed_tokens.weight", {c.vocab_size, c.d_model}});
  if (c.position == PositionKind::learned) s.push_back({"embed_positions.weight", {c.max_positions, c.d_model}});
  if (c.type_vocab_size > 0) s.push_back({"embed_token_types.weight", {c.type_vocab_size, c.d_model}});
  if (c.embedding_norm) norm(s, "embed_norm", c);
  switch (c.architecture) {
    case Architecture::encoder_only: stack(s, "encoder", c.n_layers, false, c); break;
    case Architecture::decoder_only: stack(s, "decoder", c.n_layers, false, c); break;
    case Architecture::encoder_decoder:
      stack(s, "encoder", c.n_layers, false, c);
      stack(s, "decoder", c.decoder_layers(), true, c);
      break;
  }
  heads(s, c);
  return s;
}

// ---- Hugging Face schemes ----------------------------------------------------------------
Specs gpt2_specs(const ModelConfig& c) {
  const std::int64_t C = c.d_model;
  Specs s{{"transformer.wte.weight", {c.vocab_size, C}}, {"transformer.wpe.weight", {c.max_positions, C}}};
  for (std::int64_t i = 0; i < c.n_layers; ++i) {
    const std::string p = at("transformer.h", i);
    s.push_back({p + "ln_1.weight", {C}});
    s.push_back({p + "ln_1.bias", {C}});
    s.push_back({p + "attn.c_attn.weight", {C, 3 * C}});  // Conv1D: (in, out)
    s.push_back({p + "attn.c_attn.bias", {3 * C}});
    s.push_back({p + "attn.c_proj.weight", {C, C}});
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

Specs llama_specs(const ModelConfig& c) {
  const std::int64_t C = c.d_model, q = c.n_heads * c.dim_head(), kv = c.kv_heads() * c.dim_head();
  Specs s{{"model.embed_tokens.weight", {c.vocab_size, C}}};
  for (std::int64_t i = 0; i < c.n_layers; ++i) {
    const std::string p = at("model.layers", i);
    s.push_back({p + "input_layernorm.weight", {C}});
    // LlamaAttention: attention_bias puts biases on all four projections (c.bias); Qwen2 has
    // them on q, k and v only (c.qkv_bias).
    linear(s, p + "self_attn.q_proj", q, C, c.bias || c.qkv_bias);
    linear(s, p + "self_attn.k_proj", kv, C, c.bias || c.qkv_bias);
    linear(s, p + "self_attn.v_proj", kv, C, c.bias || c.qkv_bias);
    linear(s, p + "self_attn.o_proj", C, q, c.bias);
    s.push_back({p + "post_attention_layernorm.weight", {C}});
    linear(s, p + "mlp.gate_proj", c.d_ff, C, false);
    linear(s, p + "mlp.up_proj", c.d_ff, C, false);
    linear(s, p + "mlp.down_proj", C, c.d_ff, false);
  }
  s.push_back({"model.norm.weight", {C}});
  if (!c.tie_embeddings) s.push_back({"lm_head.weight", {c.vocab_size, C}});
  return s;
}

Specs bert_specs(const ModelConfig& c) {
  const std::int64_t C = c.d_model;
  Specs s{{"bert.embeddings.word_embeddings.weight", {c.vocab_size, C}},
          {"bert.embeddings.position_embeddings.weight", {c.max_positions, C}}};
  if (c.type_vocab_size > 0) s.push_back({"bert.embeddings.token_type_embeddings.weight", {c.type_vocab_size, C}});
  s.push_back({"bert.embeddings.LayerNorm.weight", {C}});
  s.push_back({"bert.embeddings.LayerNorm.bias", {C}});
  for (std::int64_t i = 0; i < c.n_layers; ++i) {
    const std::string p = at("bert.encoder.layer", i);
    linear(s, p + "attention.self.query", C, C, true);
    linear(s, p + "attention.self.key", C, C, true);
    linear(s, p + "attention.self.value", C, C, true);
    linear(s, p + "attention.output.dense", C, C, true);
    s.push_back({p + "attention.output.LayerNorm.weight", {C}});
    s.push_back({p + "attention.output.LayerNorm.bias", {C}});
    linear(s, p + "intermediate.dense", c.d_ff, C, true);
    linear(s, p + "output.dense", C, c.d_ff, true);
    s.push_back({p + "output.LayerNorm.weight", {C}});
    s.push_back({p + "output.LayerNorm.bias", {C}});
  }
  if (c.head == HeadKind::classifier) {
    linear(s, "bert.pooler.dense", C, C, true);
    linear(s, "classifier", c.num_labels, C, true);
  } else if (c.head == HeadKind::masked_lm) {
    linear(s, "cls.predictions.transform.dense", C, C, true);
    s.push_back({"cls.predictions.transform.LayerNorm.weight", {C}});
    s.push_back({"cls.predictions.transform.LayerNorm.bias", {C}});
    s.push_back({"cls.predictions.bias", {c.vocab_size}});
  }
  return s;
}

void t5_attention(Specs& s, const std::string& p, const ModelConfig& c) {
  const std::int64_t inner = c.n_heads * c.dim_head();
  for (const char* n : {"q", "k", "v"}) s.push_back({p + n + ".weight", {inner, c.d_model}});
  s.push_back({p + "o.weight", {c.d_model, inner}});
}

void t5_ffn(Specs& s, const std::string& p, const ModelConfig& c) {
  if (c.gated_ffn()) {
    s.push_back({p + "DenseReluDense.wi_0.weight", {c.d_ff, c.d_model}});
    s.push_back({p + "DenseReluDense.wi_1.weight", {c.d_ff, c.d_model}});
  } else {
    s.push_back({p + "DenseReluDense.wi.weight", {c.d_ff, c.d_model}});
  }
  s.push_back({p + "DenseReluDense.wo.weight", {c.d_model, c.d_ff}});
  s.push_back({p + "layer_norm.weight", {c.d_model}});
}

Specs t5_specs(const ModelConfig& c) {
  Specs s{{"shared.weight", {c.vocab_size, c.d_model}}};
  for (const char* side : {"encoder", "decoder"}) {
    const bool dec = std::string(side) == "decoder";
    const std::int64_t layers = dec ? c.decoder_layers() : c.n_layers;
    for (std::int64_t i = 0; i < layers; ++i) {
      const std::string p = at(std::string(side) + ".block", i);
      t5_attention(s, p + "layer.0.SelfAttention.", c);
      if (i == 0) s.push_back({p + "layer.0.SelfAttention.relative_attention_bias.weight", {c.relative_buckets, c.n_heads}});
      s.push_back({p + "layer.0.layer_norm.weight", {c.d_model}});
      if (dec) {
        t5_attention(s, p + "layer.1.EncDecAttention.", c);
        s.push_back({p + "layer.1.layer_norm.weight", {c.d_model}});
      }
      t5_ffn(s, p + (dec ? "layer.2." : "layer.1."), c);
    }
    s.push_back({std::string(side) + ".final_layer_norm.weight", {c.d_model}});
  }
  if (!c.tie_embeddings) s.push_back({"lm_head.weight", {c.vocab_size, c.d_model}});
  return s;
}

Specs marian_specs(const ModelConfig& c) {
  const std::int64_t C = c.d_model, q = c.n_heads * c.dim_head();
  Specs s{{"model.shared.weight", {c.vocab_size, C}}};
  for (const char* side : {"encoder", "decoder"}) {
    const bool dec = std::string(side) == "decoder";
    for (std::int64_t i = 0; i < (dec ? c.decoder_layers() : c.n_layers); ++i) {
      const std::string p = at("model." + std::string(side) + ".layers", i);
      for (const char* a : {"self_attn", "encoder_attn"}) {
        if (!dec && std::string(a) == "encoder_attn") continue;
        for (const char* m : {"k_proj", "v_proj", "q_proj"}) linear(s, p + a + "." + m, q, C, true);
        linear(s, p + a + ".out_proj", C, q, true);
        norm(s, p + a + "_layer_norm", c);
      }
      linear(s, p + "fc1", c.d_ff, C, true);
      linear(s, p + "fc2", C, c.d_ff, true);
      norm(s, p + "final_layer_norm", c);
    }
  }
  if (!c.tie_embeddings) s.push_back({"lm_head.weight", {c.vocab_size, C}});
  s.push_back({"final_logits_bias", {1, c.vocab_size}});
  return s;
}

}  // namespace

bool uses_llama_layout(const ModelConfig& c) {
  return c.model_type == "llama" || c.model_type == "mistral" || c.model_type == "qwen2";
}

std::vector<ParamSpec> parameter_specs(const ModelConfig& c) {
  if (c.model_type == "gpt2") return gpt2_specs(c);
  if (uses_llama_layout(c)) return llama_specs(c);
  if (c.model_type == "bert") return bert_specs(c);
  if (c.model_type == "t5") return t5_specs(c);
  if (c.model_type == "marian") return marian_specs(c);
  return engine_specs(c);
}

}  // namespace tfm
