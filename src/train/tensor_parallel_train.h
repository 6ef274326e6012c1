// Tensor parallelism in the training loop (distributed.tensor_parallel T; docs/distributed.md).
// The job's N ranks form N / T replicas of T consecutive ranks each (rank = replica * T +
// shard): the shards of one replica split every attention's heads and every FFN's hidden
// units (Model::shard_tensor_parallel) and run each micro-batch together; the replicas split
// the batch as data parallelism does, each shard summing its gradients with the same shard of
// the other replicas. T = 1 is plain data parallelism and changes nothing.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "dist/comm.h"
#include "tfm/model.h"
#include "tfm/train.h"
#include "train/sharded_checkpoint.h"

namespace tfm::train_detail {

// Model's hooks over an MPI group: the in-place sum of a shard's partial products
// (Model::shard_tensor_parallel) and a pipeline stage's send, receive and broadcast
// (Model::shard_pipeline), f32 tensors, ranks within g. The CLI's inference and the trainers
// use the same ones.
Model::PartialSum partial_sum_over(const dist::Group& g);
Model::PipeComm pipe_comm_over(const dist::Group& g);

class TensorParallel {
 public:
  // Splits the job (a collective over every rank); fails when T does not divide the ranks or
  // the config uses what tensor parallelism does not cover.
  explicit TensorParallel(const TrainConfig& cfg);
  int shards() const { return tp_.size; }
  bool on() const { return tp_.size > 1; }
  const dist::Group& shard_group() const { return tp_; }    // this replica's shards
  const dist::Group& replica_group() const { return dp_; }  // the same shard of every replica
  // Whether this rank writes (checkpoints, metrics, progress): rank 0 of the job.
  bool writes() const { return dist::rank() == 0; }

  // Makes `m` this rank's shard (nothing when T = 1). The partial sums are ordered, so every
  // shard gets the same bits.
  void shard(Model& m) const;
  // A whole model's optimizer state ("kind.name" -> tensor), sliced for this shard.
  std::map<std::string, Tensor> slice_state(const Model& shard, const std::map<std::string, Tensor>& state) const;
  // This shard's part of a checkpoint (a collective over the shard group; the whole model
  // when T = 1): every split
  // parameter and its optimizer state gathered whole to the shard that owns it, the owners
  // chosen largest first to even out the bytes each writes; the whole ones likewise.
  CheckpointPart checkpoint_part(const Model& shard, const Optimizer& opt) const;
  // The split parameters' squared gradient norms summed over the shards (clip_grad_norm).
  SplitParameters split_parameters(const Model& shard) const;
  // One line on the layout and what this shard holds (a collective: every shard calls it).
  std::string summary(const Model& shard) const;
  // Around each training step: the sums of the steps are counted apart from evaluation's and
  // checkpoints'. traffic(): their count and volume per step.
  void step_begin() { at_begin_ = *counts_; }
  void step_end();
  std::string traffic() const;

 private:
  dist::Group tp_, dp_;
  struct Counts {
    std::int64_t sums = 0, floats = 0;
  };
  std::shared_ptr<Counts> counts_ = std::make_shared<Counts>();  // every sum (the model's function holds it)
  Counts at_begin_, in_steps_;
  std::int64_t steps_ = 0;
};

}  // namespace tfm::train_detail
