// tfm eval --stride: perplexity of a language model on any text with strided windows
// (include/tfm/perplexity.h gives the convention).
#pragma once

#include <cstdint>
#include <string>

namespace tfm::cli {

// context 0: the model's max_positions. Prints the eval table (or one JSON object).
void run_strided_eval(const std::string& dir, const std::string& data_file, std::int64_t context, std::int64_t stride,
                      bool json);

}  // namespace tfm::cli
