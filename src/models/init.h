// Family-convention initialisation of a model's parameters.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tfm/model_config.h"

namespace tfm {

void init_parameters(const ModelConfig& cfg, const std::vector<ParamSpec>& specs,
                     std::map<std::string, Tensor>& params, std::uint64_t seed);

}  // namespace tfm
