// Parameter initialisation by each family's convention, reproducible from a seed: parameter
// number i (in parameter_specs order) draws from stream mix(seed, i).
#include "models/init.h"

#include <cmath>

#include "models/family.h"
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
  const Family& family = model_family(c.model_type);
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const ParamSpec& p = specs[i];
    Tensor t = family.fixed_init ? family.fixed_init(c, p) : Tensor();
    if (t.defined()) {
      params[p.name] = t;
      continue;
    }
    if (ends_with(p.name, ".bias") || ends_with(p.name, "predictions.bias") || p.name == "final_logits_bias") {
      t = Tensor::zeros(p.shape);
    } else if (c.norm == NormKind::scale_norm && p.shape == Shape{1}) {
      t = Tensor::full(p.shape, static_cast<float>(std::sqrt(static_cast<double>(c.d_model))));  // g = sqrt(d)
    } else if (is_norm_weight(p.name)) {
      t = Tensor::ones(p.shape);
    } else {
      // The normal's standard deviation by the family's convention; 0 means Xavier-uniform.
      const double std = family.init_std ? family.init_std(c, p.name) : c.init_std;
      if (std > 0) {
        t = Tensor::randn(p.shape, mix(seed, i), 0.0f, static_cast<float>(std));
      } else {
        TFM_CHECK(p.shape.size() == 2, "init", "Xavier init needs a matrix, ", p.name, " is ", shape_str(p.shape));
        const double bound = std::sqrt(6.0 / static_cast<double>(xavier_fans(c, p.name, p.shape)));
        t = Tensor::uniform(p.shape, mix(seed, i), static_cast<float>(-bound), static_cast<float>(bound));
      }
    }
    // An nn.Embedding(padding_idx=pad_token_id) (BERT's, Llama's): Hugging Face's
    // _init_weights zeroes that row.
    if (p.name == family.padded_embedding && c.pad_token_id >= 0 && c.pad_token_id < p.shape[0]) {
      float* row = t.data<float>() + c.pad_token_id * p.shape[1];  // (V, C) contiguous
      for (std::int64_t j = 0; j < p.shape[1]; ++j) row[j] = 0.0f;
    }
    params[p.name] = t;
  }
}

}  // namespace tfm
