// Printing a model's architecture, parameter count and memory (tfm info CONFIG.json).
#pragma once

#include <string>

#include "tfm/model_config.h"

namespace tfm::cli {

void print_model_summary(const ModelConfig& cfg, const std::string& source);
std::string human_bytes(double bytes);  // "1.23 GiB"
std::string human_count(double n);      // "124.4M"

}  // namespace tfm::cli
