// Parameter initialisation by each family's convention, reproducible from a seed: parameter
// number i (in parameter_specs order) draws from stream mix(seed, i).
#include "models/init.h"

#include <cmath>

#include "tfm/error.h"

namespace tfm {
namespace {

std::uint64_t mix(std::uint64_t seed, std::uint64_t i) {
  std::uint64_t z = seed * 0x9E3779B97F4A7C15ull + i + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

bool ends_with(const std::string& s, const std::string& t) {
  return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}
bool has(const std::string& s, const char* t) { return s.find(t) != std::string::npos; }

bool is_norm_weight(const std::string& n) {
  return ends_with(n, ".weight") && (has(n, "norm") || has(n, "ln_") || has(n, "LayerNorm") || has(n, "layernorm"));
}

// Standard deviation of a normal init for weight `n` (shape s); 0 means Xavier-uniform.
double weight_std(const ModelConfig& c, const std::string& n) {
  const double f = c.init_std;
  if (c.model_type == "gpt2") {
    // GPT-2 scales the residual projections by 1/sqrt(2 * n_layer) (section 2.3 of the paper).
    return has(n, "c_proj.weight") ? f / std::sqrt(2.0 * static_cast<double>(c.n_layers)) : f;
  }
  if (c.model_type == "t5") {  // T5's _init_weights, with initializer_factor f
    const double d = static_cast<double>(c.d_model), dkv = static_cast<double>(c.dim_head());
    const double h = static_cast<double>(c.n_heads);
    if (n == "shared.weight" || n == "lm_head.weight") return f;
    if (ends_with(n, ".q.weight")) return f * std::pow(d * dkv, -0.5);
    if (ends_with(n, ".k.weight") || ends_with(n, ".v.weight")) return f * std::pow(d, -0.5);
    if (ends_with(n, ".o.weight")) return f * std::pow(h * dkv, -0.5);
    if (has(n, "relative_attention_bias")) return f * std::pow(d, -0.5);
    if (has(n, ".wo.weight")) return f * std::pow(static_cast<double>(c.d_ff), -0.5);
    return f * std::pow(d, -0.5);  // wi, wi_0, wi_1
  }
  if (c.model_type == "transformer" && f == 0.0) {
    // Vaswani-style: token embeddings N(0, d^-1/2) (they are multiplied by sqrt(d)), tables of
    // relative biases small, projection matrices Xavier-uniform as nn.Transformer does.
    if (has(n, "embed_") || has(n, "relative_attention_bias")) return std::pow(static_cast<double>(c.d_model), -0.5);
    return 0.0;
  }
  return f;
}

// fan_in + fan_out for Xavier. nn.MultiheadAttention initialises q, k and v as one packed
// (3C, C) matrix, so each gets the packed matrix's bound; with GQA the pack is q + 2 kv.
std::int64_t xavier_fans(const ModelConfig& c, const std::string& n, const Shape& s) {
  if (ends_with(n, "q_proj.weight") || ends_with(n, "k_proj.weight") || ends_with(n, "v_proj.weight"))
    return s[1] + (c.n_heads + 2 * c.kv_heads()) * c.dim_head();
  return s[0] + s[1];
}

}  // namespace

void init_parameters(const ModelConfig& c, const std::vector<ParamSpec>& specs, std::map<std::string, Tensor>& params,
                     std::uint64_t seed) {
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const ParamSpec& p = specs[i];
    Tensor t;
    if (ends_with(p.name, ".bias") || ends_with(p.name, "predictions.bias") || p.name == "final_logits_bias") {
      t = Tensor::zeros(p.shape);
    } else if (c.norm == NormKind::scale_norm && p.shape == Shape{1}) {
      t = Tensor::full(p.shape, static_cast<float>(std::sqrt(static_cast<double>(c.d_model))));  // g = sqrt(d)
    } else if (is_norm_weight(p.name)) {
      t = Tensor::ones(p.shape);
    } else {
      const double std = weight_std(c, p.name);
      if (std > 0) {
        t = Tensor::randn(p.shape, mix(seed, i), 0.0f, static_cast<float>(std));
      } else {
        TFM_CHECK(p.shape.size() == 2, "init", "Xavier init needs a matrix, ", p.name, " is ", shape_str(p.shape));
        const double bound = std::sqrt(6.0 / static_cast<double>(xavier_fans(c, p.name, p.shape)));
        t = Tensor::uniform(p.shape, mix(seed, i), static_cast<float>(-bound), static_cast<float>(bound));
      }
    }
    // BERT's and Llama's word embeddings are nn.Embedding(padding_idx=pad_token_id): Hugging
    // Face's _init_weights zeroes that row.
    const bool padded_embedding = (c.model_type == "bert" && p.name == "bert.embeddings.word_embeddings.weight") ||
                                  (uses_llama_layout(c) && p.name == "model.embed_tokens.weight");
    if (padded_embedding && c.pad_token_id >= 0 && c.pad_token_id < p.shape[0]) {
      float* row = t.data<float>() + c.pad_token_id * p.shape[1];  // (V, C) contiguous
      for (std::int64_t j = 0; j < p.shape[1]; ++j) row[j] = 0.0f;
    }
    params[p.name] = t;
  }
}

}  // namespace tfm
