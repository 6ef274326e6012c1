// The checkpoint of a model-parallel run (docs/formats.md, "Sharded checkpoints"). No rank
// holds the whole model, so none writes it whole: each rank of the first replica writes the
// whole tensors it owns (its stage's layers; for tensor parallelism each split parameter
// gathered to one owning shard, the owners balanced by size) into checkpoint.tmp/ as
// model-0000k-of-0000N.safetensors and optimizer-0000k-of-0000N.safetensors, and rank 0 adds
// the two index files (Hugging Face's model.safetensors.index.json layout), config.json,
// tokenizer.json and train_state.json and commits the directory as save_checkpoint does.
// The result is an ordinary sharded model directory: every command and every layout loads it.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "dist/comm.h"
#include "tfm/model_config.h"
#include "tfm/tensor.h"
#include "tfm/tokenizer.h"
#include "tfm/train.h"

namespace tfm::train_detail {

// What one rank writes: whole tensors under the whole model's names.
struct CheckpointPart {
  ModelConfig config;                    // the whole model's
  std::map<std::string, Tensor> params;  // the parameters this rank owns
  std::map<std::string, Tensor> state;   // their optimizer state ("kind.name"; rank 0: keys of no parameter)
  std::int64_t optimizer_steps = 0;
};

// A collective over `g` (the first replica's shards or stages). The output directory must be
// one that every rank of g sees (a shared file system across machines); a rank whose shard
// rank 0 cannot see fails the save by name. A failure on any rank fails the save on every
// rank, removes checkpoint.tmp/ and leaves the previous checkpoint as it was.
void save_sharded_checkpoint(const std::string& out_dir, const dist::Group& g, const CheckpointPart& mine,
                             const Tokenizer& tok, const TrainState& state);

}  // namespace tfm::train_detail
