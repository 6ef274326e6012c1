// A family's defaults at a size a unit test runs in milliseconds (test_families.cpp, every
// family once; test_tensor_parallel.cpp, sizes that split over 2 and 4 ranks).
#pragma once

#include "models/family.h"
#include "tfm/model_config.h"

namespace tfm::test {

// d_model = 8 x heads, head_dim 8 where the family sets one, d_ff = 2 x d_model, 2 layers (and
// decoder_layers of an encoder-decoder), kv_heads where the family has GQA, no dropout; images
// 8x8 in 4x4 patches, audio 8 mel bins over 20 frames.
ModelConfig small_family_config(const Family& f, std::int64_t heads, std::int64_t kv_heads, std::int64_t decoder_layers);

}  // namespace tfm::test
