// LoRA adapters on disk in PEFT's layout, so they pass between tfm and Hugging Face PEFT:
//   DIR/adapter_config.json       {"peft_type": "LORA", "r", "lora_alpha", "lora_dropout",
//                                  "target_modules", "fan_in_fan_out", "bias": "none", ...}
//   DIR/adapter_model.safetensors "base_model.model.<module>.lora_A.weight" (r, in) and
//                                 "...lora_B.weight" (out, r), f32
// <module> is the engine's module name (Model::linear_modules: the parameter names of the
// model's family, as in config.json's model_type).
//
// Bottleneck adapters and prefix tuning (peft.h) use the same two files:
//   BOTTLENECK (a tfm extension; PEFT has no bottleneck adapters, the keys follow AdapterHub's
//   BnConfig): {"peft_type": "BOTTLENECK", "placement", "mh_adapter", "output_adapter",
//   "reduction_factor", "bottleneck_size", "non_linearity", "init_weights"}; tensors
//   "base_model.model.<layer>{attention,output}_adapter.adapter_{down,up}.{weight,bias}".
//   PREFIX_TUNING (PEFT's): {"num_virtual_tokens", "token_dim", "num_layers",
//   "num_attention_heads", "prefix_projection", "encoder_hidden_size"}; tensor
//   "prompt_embeddings" (P, num_layers * 2 * token_dim), the final prefixes, and after training
//   with prefix_projection also "prompt_encoder.*" (the reparameterisation, for resuming).
#pragma once

#include <string>

#include "tfm/lora.h"
#include "tfm/model.h"

namespace tfm {

// Writes both files atomically; the model must have LoRA factors. base_model goes into
// base_model_name_or_path (the directory the base weights came from).
void save_lora_adapter(const std::string& dir, const Model& model, const std::string& base_model = "");
// Reads adapter_config.json (only peft_type LORA, bias "none"; other values are refused by
// name).
LoraConfig read_lora_adapter_config(const std::string& dir);
// Attaches DIR's factors to `model` (Model::attach_lora); errors name the file and tensor.
void load_lora_adapter(const std::string& dir, Model& model);

// Any adapter kind: the model's own (save) or the directory's peft_type (load).
void save_adapter(const std::string& dir, const Model& model, const std::string& base_model = "");
void load_adapter(const std::string& dir, Model& model);
// DIR's peft_type ("LORA", "BOTTLENECK", "PREFIX_TUNING"); errors name the file.
std::string read_adapter_type(const std::string& dir);

}  // namespace tfm
