// tfm info -m FILE.gguf: what the file holds (architecture, tokenizer, tensor types) before
// the model summary and memory plan that every model gets.
#pragma once

#include <string>

#include "tfm/model_config.h"

namespace tfm::cli {

// Prints the GGUF-specific lines and returns the file's ModelConfig.
ModelConfig print_gguf_info(const std::string& path);

}  // namespace tfm::cli
