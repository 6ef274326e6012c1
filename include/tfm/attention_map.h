// One attention call's weights as the engine records them for inspection (heat maps, the
// server's /v1/attention). Its own header so that nn/ can fill them in without seeing Model.
#pragma once

#include <cstdint>
#include <string>

#include "tfm/tensor.h"

namespace tfm {

// One attention call's weights, recorded when capture is on (Model::set_attention_capture).
struct AttentionMap {
  std::string stack;    // "encoder" | "decoder"
  std::string kind;     // "self" | "cross"
  std::int64_t layer = 0;
  Tensor weights;       // (B, H, Tq, Tk) softmax weights, zeros where masked (before dropout)
  // A tensor-parallel shard's call holds heads [head_offset, head_offset + H) of heads_total
  // (0: all of them); the model gathers the whole layer's before its forward returns.
  std::int64_t head_offset = 0, heads_total = 0;
};

}  // namespace tfm
