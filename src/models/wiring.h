// The pieces family files build from: parameter-spec helpers and WireParams, which hands a
// family's wire function the modules of its parameter map by name.
#pragma once

#include <array>
#include <map>
#include <string>
#include <vector>

#include "models/layout.h"
#include "nn/modules.h"
#include "tfm/model_config.h"

namespace tfm {

// "<prefix>.<i>." : the parameter prefix of layer i.
std::string layer_prefix(const std::string& prefix, std::int64_t i);

// Specs of an nn.Linear (out, in) [+ bias] and of a norm of the config's kind.
void add_linear_spec(std::vector<ParamSpec>& s, const std::string& name, std::int64_t out, std::int64_t in, bool bias);
void add_norm_spec(std::vector<ParamSpec>& s, const std::string& name, const ModelConfig& c);

class WireParams {
 public:
  WireParams(const std::map<std::string, Tensor>& p, const LoraWiring& lora, std::map<std::string, bool>* linears)
      : p_(p), lora_(lora), linears_(linears) {}
  Tensor need(const std::string& name) const;   // throws naming a missing parameter
  Tensor maybe(const std::string& name) const;  // undefined when absent
  // name.weight [+ name.bias], with its LoRA factors when the map has them. in_out: the
  // weight is stored (in, out) (GPT-2's Conv1D).
  nn::Linear linear(const std::string& name, bool in_out = false) const;
  nn::Bottleneck bottleneck(const std::string& name) const;  // identity when absent
  nn::Norm norm(const std::string& name, const ModelConfig& c) const;

 private:
  const std::map<std::string, Tensor>& p_;
  LoraWiring lora_;
  std::map<std::string, bool>* linears_;
};

// An attention block of the config's shape, no projections yet.
nn::Attention attention_shape(const ModelConfig& c);
// An attention block whose four projections are `prefix` + the family's names for q, k, v, o.
nn::Attention wire_attention(const WireParams& P, const ModelConfig& c, const std::string& prefix,
                             const std::array<const char*, 4>& qkvo);
// A feed-forward block of the config's activation, no projections yet.
nn::FeedForward ffn_shape(const ModelConfig& c);

// Weight layouts when a family's files store them differently from the engine.
// Rows of same-typed 2-D tensors one after another (any dtype: block-quantized rows are whole).
Tensor concat_rows(const std::vector<Tensor>& parts);
Tensor transpose_2d(const Tensor& w);  // a fresh (in, out) copy of (out, in)
// The Conv1D (in, out) form of an (out, in) weight; compact weights keep (out, in), the
// engine's orientation for them.
Tensor conv1d_weight(const Tensor& w);

// A decoder-only LM of the engine's scheme with the structure the hub's decoder families
// share (pre-norm, final norm, no embedding scale or norm, unwindowed, scaled scores): the
// precondition of a family's computes_as_engine.
bool engine_decoder_lm(const ModelConfig& c);

}  // namespace tfm
