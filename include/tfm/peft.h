// Bottleneck adapters and prefix tuning: the two parameter-efficient adapters besides LoRA
// (lora.h). Model::add_bottleneck / add_prefix apply them (model.h); adapter.h reads and
// writes them in PEFT's file layout. docs/training.md maps the names to HF PEFT / AdapterHub.
#pragma once

#include <cstdint>
#include <string>

namespace tfm {

// Bottleneck adapter (Houlsby et al. 2019): a(h) = h + W_up f(W_down h + b_down) + b_up on a
// sublayer's output, before the residual sum, with W_down (m, C), W_up (C, m). W_up and
// b_up start at zero, so the adapted model starts equal to the base (near-identity init;
// W_down Kaiming-uniform as AdapterHub's "mam_adapter" init).
enum class BottleneckPlacement {
  houlsby,   // after self-attention and after the FFN of every layer (AdapterHub mh_adapter + output_adapter)
  pfeiffer,  // after the FFN only (AdapterHub output_adapter)
};
enum class BottleneckActivation { relu, gelu, swish };

struct BottleneckConfig {
  BottleneckPlacement placement = BottleneckPlacement::houlsby;
  double reduction_factor = 16.0;    // m = d_model / reduction_factor when bottleneck_size is 0
  std::int64_t bottleneck_size = 0;  // m, when > 0
  BottleneckActivation non_linearity = BottleneckActivation::relu;
  std::int64_t size(std::int64_t d_model) const;  // m, at least 1
};

// Prefix tuning (Li & Liang 2021), PEFT's PREFIX_TUNING: num_virtual_tokens learned key and
// value vectors per self-attention layer, seen by every query before the sequence's own
// keys. With prefix_projection they are trained through PEFT's reparameterisation
// (embedding (P, C) -> Linear(C, hidden) -> tanh -> Linear(hidden, L*2*kv_dim)); saved and
// used as the final (P, L*2*kv_dim) table either way.
struct PrefixConfig {
  std::int64_t num_virtual_tokens = 20;
  bool prefix_projection = false;
  std::int64_t encoder_hidden_size = 0;  // the projection's hidden size; 0: d_model
};

const char* to_string(BottleneckPlacement v);
const char* to_string(BottleneckActivation v);
// Parse names as written in configs; errors name `where` and the allowed values.
BottleneckPlacement parse_bottleneck_placement(const std::string& s, const std::string& where);
BottleneckActivation parse_bottleneck_activation(const std::string& s, const std::string& where);

}  // namespace tfm
