// Models in GGUF files (llama.cpp's format; the container is tfm/gguf.h).
//
//   auto m = tfm::load_gguf_model("model.gguf");          // config, weights, tokenizer
//   tfm::save_gguf_model("out.gguf", m.model, m.tokenizer, {tfm::GgmlType::q8_0});
//
// Read: general.architecture llama (also Mistral/TinyLlama/SmolLM-style files), qwen2
// and gpt2; every tensor type of tfm/gguf.h is dequantized to f32 at load. llama.cpp's
// conventions are undone on the way in: the Q/K row permutation its converter applies for
// the llama architecture's interleaved RoPE, and GPT-2's Conv1D weights stored transposed.
// The tokenizer comes from the tokenizer.ggml.* metadata (docs/formats.md).
// Written: the llama family (qwen2 when it has q/k/v biases) and gpt2, with a byte-level
// BPE tokenizer, tensors in f32, f16, bf16 or q8_0 (norms and biases stay f32).
#pragma once

#include <string>

#include "tfm/gguf.h"
#include "tfm/model_dir.h"

namespace tfm {

// Metadata a GGUF file carries beside the model: what `tfm info` prints.
struct GgufModelInfo {
  std::string architecture;   // general.architecture
  std::string name;           // general.name
  std::string chat_template;  // tokenizer.chat_template ("" when absent)
  std::string tokenizer_model, tokenizer_pre;
};

// map_weights: the weight matrices kept in their stored type view the file's read-only mapping
// instead of being copied out, for a caller that splits the model at once (load_model under
// tensor or pipeline parallelism: the split copies only its slices and lets the pages go);
// nothing may write them in place.
LoadedModel load_gguf_model(const std::string& path, GgufModelInfo* info = nullptr, bool map_weights = false);
// The same from a parsed file (tests, fuzzing).
LoadedModel gguf_to_model(const GgufFile& file, GgufModelInfo* info = nullptr, bool map_weights = false);
// The ModelConfig the file's metadata describes (no tensor is read): for `tfm info -m`.
ModelConfig gguf_model_config(const GgufFile& file, GgufModelInfo* info = nullptr);

struct GgufSaveOptions {
  GgmlType type = GgmlType::f32;  // for f32 matrices; 1-D tensors stay f32, compact
                                  // (quantized) matrices keep their type (general.file_type
                                  // then names the most common one)
  std::string name;               // general.name ("" leaves it out)
  std::string chat_template;      // tokenizer.chat_template ("" leaves it out)
};
void save_gguf_model(const std::string& path, const Model& model, const Tokenizer& tokenizer,
                     const GgufSaveOptions& options = {});

// tokenizer.json text equivalent to the file's tokenizer.ggml.* metadata: model "gpt2" is
// byte-level BPE with merges (pre-tokenizer from tokenizer.ggml.pre), model "llama" is
// SentencePiece-style BPE (merges derived from the scores, byte_fallback, "▁" for spaces).
std::string gguf_tokenizer_json(const GgufFile& file);

// True when the path names a GGUF file (by its extension).
bool is_gguf_path(const std::string& path);

}  // namespace tfm
