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

namespace tfm {

// Training memory of one step on batch sequences of seq_len tokens (encoder-decoder: sources
// and targets both seq_len), from the config alone. Activations are what the autograd tape
// keeps between the forward and the backward pass; with activation checkpointing each layer
// keeps only its input, and the backward pass recomputes one layer at a time on top of that.
struct TrainMemoryPlan {
  std::int64_t seq_len = 0, batch = 0;
  std::int64_t state_bytes = 0;          // f32 weights + gradients + AdamW's two moments
  std::int64_t activation_bytes = 0;     // kept by the tape without checkpointing
  std::int64_t checkpoint_kept_bytes = 0;       // with checkpointing: the layers' inputs + embeddings/head
  std::int64_t checkpoint_recompute_bytes = 0;  // ... plus one layer's activations while it is recomputed
  std::int64_t checkpointed_bytes() const { return checkpoint_kept_bytes + checkpoint_recompute_bytes; }
};
TrainMemoryPlan plan_training_memory(const ModelConfig& cfg, std::int64_t seq_len, std::int64_t batch);

}  // namespace tfm
