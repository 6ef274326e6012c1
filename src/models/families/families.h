// The family files' constructors, listed once in the registry (src/models/family.cpp), and
// what the family files share.
#pragma once

#include <array>
#include <string>

#include "models/config_keys.h"
#include "models/family.h"
#include "models/wiring.h"

namespace tfm {

Family transformer_family();
Family gpt2_family();
Family llama_family(const std::string& model_type);  // llama, mistral, qwen2
Family bert_family();
Family t5_family();
Family marian_family();
Family vit_family();
Family deit_family();
Family whisper_family();
Family retro_family();
Family clip_family();

// The engine's own names (transformer.cpp), shared with RETRO (retro.cpp): an attention block's
// q/k/v/o_proj specs under `prefix`, a stack's specs and its wiring ("<name>.layers.<i>.",
// "<name>.norm").
void engine_attention_specs(std::vector<ParamSpec>& s, const std::string& prefix, const ModelConfig& c);
void engine_stack_specs(std::vector<ParamSpec>& s, const std::string& name, std::int64_t layers, bool cross,
                        const ModelConfig& c);
void wire_engine_stack(Stack& s, const std::string& name, std::int64_t n, bool cross, const ModelConfig& c,
                       const WireParams& P);

// ViT's embeddings and encoder under `root` ("vit.", "deit."), shared with DeiT (vit.cpp):
// the config checks every image family runs last, the parameter specs and the wiring.
ConfigSchema vit_like_schema(const std::string& model_type);  // ViTConfig's keys, no architectures
void finish_image_config(ModelConfig& c, const nlohmann::json& file, const std::string& where);
std::vector<ParamSpec> vit_encoder_specs(const ModelConfig& c, const std::string& root);
void wire_vit_encoder(Layout& l, const ModelConfig& c, const WireParams& P, const std::string& root);

// BART's layer names under model.encoder.layers.<i> / model.decoder.layers.<i> (self_attn,
// encoder_attn, their _layer_norm, fc1, fc2, final_layer_norm), shared by Marian and Whisper.
void wire_bart_layers(Layout& l, const ModelConfig& c, const WireParams& P);
// BART-style configs name the decoder's heads and FFN width apart from the encoder's; the
// engine builds both stacks alike, so a file whose decoder_attention_heads or decoder_ffn_dim
// differs from the encoder's is refused (a key that is absent is not checked).
void check_decoder_sizes_equal(const ModelConfig& c, const nlohmann::json& file, const std::string& where);

// Shared by the file-name tests of the hub families.
inline bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
inline bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// "blk.<i>.<name>": a llama.cpp layer tensor.
inline std::string gguf_block(std::int64_t i, const char* name) { return "blk." + std::to_string(i) + "." + name; }

}  // namespace tfm
