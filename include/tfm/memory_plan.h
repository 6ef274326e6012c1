// The memory planner (`tfm info -m DIR --ctx-size C --batch B`): what running a model will
// take, computed from its config alone, before anything is allocated.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "tfm/model_config.h"

namespace tfm {

struct MemoryPlan {
  std::int64_t ctx_size = 0, batch = 0, source_len = 0;  // positions per sequence, sequences, source tokens
  std::vector<std::pair<std::string, std::int64_t>> weights;  // f32 bytes by part (embeddings, layers, ...)
  std::int64_t weight_bytes = 0;
  std::int64_t kv_self_bytes = 0;    // decoder self-attention cache: batch x ctx_size positions
  std::int64_t kv_cross_bytes = 0;   // encoder-decoder: cross-attention keys/values of batch sources
  std::int64_t kv_bytes = 0;         // KVCache::bytes_needed(...) = self + cross
  std::int64_t prefill_bytes = 0;    // activations of one prefill of ctx_size tokens (estimate)
  std::int64_t decode_bytes = 0;     // activations of one decode step of batch rows (estimate)
  std::int64_t total_bytes = 0;      // weights + kv + the larger of prefill / decode
};

// ctx_size 0: the model's max_positions. Sessions size their cache the same way (session.h):
// batch slots of ctx_size positions, and for encoder-decoder batch sources of max_positions.
MemoryPlan plan_memory(const ModelConfig& cfg, std::int64_t ctx_size, std::int64_t batch);

}  // namespace tfm
