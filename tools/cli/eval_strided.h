// tfm eval --stride: perplexity of a language model on any text with strided windows
// (include/tfm/perplexity.h gives the convention).
#pragma once

#include <cstdint>
#include <string>

#include "cli_common.h"

namespace tfm::cli {

// context 0: the model's max_positions. Prints the eval table (or one JSON object).
// weights: --dtype/--recipe; kl: also the mean KL divergence from the f32 model
// (llama-perplexity --kl-divergence's figure), its perplexity and top-token agreement.
void run_strided_eval(const std::string& dir, const std::string& data_file, std::int64_t context, std::int64_t stride,
                      bool json, const WeightOptions& weights = {}, bool kl = false);

}  // namespace tfm::cli
