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
// vocab_shards N > 1: the plan of a tensor-parallel shard (cfg: tensor_parallel_config), whose
// vocabulary tables (token embedding, vocabulary head) hold the largest shard's rows.
MemoryPlan plan_memory(const ModelConfig& cfg, std::int64_t ctx_size, std::int64_t batch, int vocab_shards = 1);

// The plans in one line: "weights 474.7 MiB + KV cache 72.0 MiB + activations 3.1 MiB = 549.8
// MiB (context 1024 x 1 sequence)" — what --max-memory prints when it refuses to start.
std::string summary(const MemoryPlan& p);
// Throws "[--max-memory] <what> needs <breakdown>: more than the limit of <max> bytes;
// <advice>" when total > max_bytes (max_bytes 0: no limit).
void check_memory_limit(std::int64_t total_bytes, std::int64_t max_bytes, const std::string& what,
                        const std::string& breakdown, const std::string& advice);
// "2G", "512MiB", "1.5g", "100000": bytes (K/M/G/T are powers of 1024); throws on anything else.
std::int64_t parse_byte_size(const std::string& text, const std::string& where);


// The activations of one training step on batch sequences of seq_len tokens (encoder-decoder:
// sources and targets both seq_len), from the config alone, as the autograd tape keeps them
// between the forward and the backward pass; with activation checkpointing each layer keeps
// only its input, and the backward pass recomputes one layer at a time on top of that. The
// per-token counts were read off the allocator (src/infer/memory_plan_train.cpp).
struct ActivationMemoryPlan {
  std::int64_t seq_len = 0, batch = 0;
  std::int64_t activation_bytes = 0;     // kept by the tape without checkpointing
  std::int64_t checkpoint_kept_bytes = 0;       // with checkpointing: the layers' inputs + embeddings/head
  std::int64_t checkpoint_recompute_bytes = 0;  // ... plus one layer's activations while it is recomputed
  std::int64_t checkpointed_bytes() const { return checkpoint_kept_bytes + checkpoint_recompute_bytes; }
};
ActivationMemoryPlan plan_activation_memory(const ModelConfig& cfg, std::int64_t seq_len, std::int64_t batch);

// What a whole training step will take at its peak, the bound --max-memory checks: the weights,
// their gradients and the optimiser's f32 state (AdamW two buffers, SGD with momentum one),
// what the tape keeps for one micro-batch (plan_activation_memory, with or without
// checkpointing) and the backward pass's working set on top of it (one layer's activation
// gradients and the logits' gradient). Checked against the allocator's measured peak of real
// steps in tests/unit/infer/test_memory_limit.cpp.
struct TrainingMemoryPlan {
  std::int64_t batch = 0, seq_len = 0;
  std::int64_t weight_bytes = 0, gradient_bytes = 0, optimizer_bytes = 0;
  std::int64_t activation_bytes = 0;  // tape + backward working set
  std::int64_t total_bytes = 0;       // the sum
};
TrainingMemoryPlan plan_training_memory(const ModelConfig& cfg, std::int64_t batch, std::int64_t seq_len,
                                        int optimizer_buffers, bool checkpoint_activations = false);
std::string summary(const TrainingMemoryPlan& p);

// Pipeline stages balanced by memory (pipeline-parallel training of a decoder-only or encoder-only model): the
// first layer of each stage and the layer count (Model::shard_pipeline's bounds) that make the
// largest stage's planned peak the least. A stage holds its layers' weights, gradients and
// optimizer state, the embeddings and head (every stage keeps them), and the activations of
// in_flight[s] micro-batches of `batch` x `seq_len` tokens (1F1B: stages - s of them, GPipe:
// all); the last stage also the logits and their gradient. The even split (pipeline_layers)
// when it is as good, or when `even` (only the peaks planned). stage_bytes: each stage's
// planned peak.
struct PipelineStagePlan {
  std::vector<std::int64_t> bounds, stage_bytes;
};
PipelineStagePlan plan_pipeline_stages(const ModelConfig& cfg, const std::vector<std::int64_t>& in_flight,
                                       std::int64_t batch, std::int64_t seq_len, int optimizer_buffers,
                                       bool checkpoint_activations = false, bool even = false);
// The same for an encoder-decoder, each stage a run of the encoder's layers and one of the
// decoder's (both stacks split at once, each stage at least one layer of each): alive[s] lists
// the (encoder, decoder) micro-batch graphs stage s holds at the moments its memory peaks (its
// schedule's; train/pipeline_schedule.h), the largest of which counts, each graph the
// activations of its stack's layers on the stage. bounds: the encoder's stages + 1 entries,
// then the decoder's (Model::shard_pipeline).
PipelineStagePlan plan_encoder_decoder_stages(const ModelConfig& cfg,
                                              const std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>>& alive,
                                              std::int64_t batch, std::int64_t seq_len, int optimizer_buffers,
                                              bool checkpoint_activations = false, bool even = false);

}  // namespace tfm
