// A model source: one on-disk format read into the pieces every command needs. load_model_dir
// detects the format (read_model_source) and builds the Model from the source; a new format
// is one reader returning a ModelSource plus one branch in read_model_source (model_dir.cpp).
#pragma once

#include <map>
#include <optional>
#include <string>

#include "tfm/model_config.h"
#include "tfm/model_dir.h"
#include "tfm/safetensors.h"
#include "tfm/tensor.h"

namespace tfm::infer_detail {

struct ModelSource {
  ModelConfig config;
  std::map<std::string, Tensor> tensors;  // names as stored; may view a read-only file mapping
  std::string weights_where;              // names the weight file(s) in errors
  GenerationDefaults generation;
  std::optional<Tokenizer> tokenizer;     // formats that embed one (GGUF); else the directory's files
  bool compact = false;                   // written by tfm quantize: bf16/f16 weights stay so
};

// config.json + safetensors weights (single file or sharded with an index), optional
// generation_config.json: the engine's own directories and Hugging Face hub directories.
ModelSource read_safetensors_dir(const std::string& dir);
// Turns the U8 byte tensors that __metadata__ marks as compact weights (docs/formats.md)
// back into bf16/f16/q8_0/q4_0/q4_k/q6_k tensors.
// Returns whether there were any.
bool decode_compact_tensors(SafetensorsFile& sf, const std::string& where);

}  // namespace tfm::infer_detail
