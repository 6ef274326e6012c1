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

// Shared by the file-name tests of the hub families.
inline bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
inline bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// "blk.<i>.<name>": a llama.cpp layer tensor.
inline std::string gguf_block(std::int64_t i, const char* name) { return "blk." + std::to_string(i) + "." + name; }

}  // namespace tfm
