// Pipeline parallelism in the training loop (distributed.pipeline_parallel P; docs/distributed.md).
// The job's N ranks form N / P pipelines of P consecutive ranks (rank = replica * P + stage;
// with tensor_parallel T each stage is T shards: rank = replica * P T + stage * T + shard):
// each rank is a stage of a decoder-only LM or of an encoder classifier (BERT, ViT;
// Model::shard_pipeline: a contiguous run of its layers; every stage keeps the embeddings,
// final norm and head, and the last stage computes the loss), and the pipelines split each
// step's micro-batches as data-parallel replicas, each stage summing its gradients with the
// same stage of the others. A pipeline's micro-batches flow through its stages in one of two
// schedules:
//   gpipe: every micro-batch's forward, then every backward (all graphs alive at once);
//   1f1b:  stage s runs P - s - 1 forwards, then alternates one forward and one backward, then
//          drains the backwards (at most P - s graphs alive: less memory, the same bubble).
// Either way each stage accumulates the micro-batches' gradients in order 0, 1, ..., as one
// process does, so a layer's gradients are one process's bit for bit; the parameters outside the
// layers are summed over the stages in rank order (exact unless a tied embedding takes
// contributions on two stages). Activations and their gradients move by MPI, with the dropout
// stream's position beside them, so every mask is one process's. An encoder-decoder (task
// seq2seq or speech) splits both stacks, stage s holding a run of each; its micro-batches go
// through the encoder's stages, then the decoder's, whose stages all read the memory, under
// GPipe or an interleaved 1F1B (pipeline_schedule.h; step_encoder_decoder in pipeline_train.cpp).
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "dist/comm.h"
#include "tfm/model.h"
#include "tfm/train.h"
#include "train/task.h"
#include "train/tensor_parallel_train.h"

namespace tfm::train_detail {

// The optimizer's f32 state per parameter, in buffers (the memory planner's optimizer_buffers):
// AdamW two, SGD with momentum one, plain SGD none.
inline int optimizer_buffers(const OptimizerConfig& o) {
  return o.kind == OptimizerKind::adamw ? 2 : o.momentum != 0 ? 1 : 0;
}

// The positions of one training example that the memory planner counts: an LM's block, a
// ViT's patches and prefix tokens, else the longest text (data.max_length).
inline std::int64_t planned_positions(const TrainConfig& cfg, const ModelConfig& mc) {
  return cfg.task == TaskKind::lm ? cfg.block_size : cfg.task == TaskKind::image_classifier ? mc.image_tokens() : cfg.max_length;
}

class PipelineParallel {
 public:
  // Checks the config (failing with the key's name) and splits the job into its groups (a
  // collective over every rank when P > 1).
  explicit PipelineParallel(const TrainConfig& cfg);
  bool on() const { return stages_ > 1; }
  int stage() const { return stage_; }
  int stages() const { return stages_; }
  const dist::Group& replica_group() const { return dp_; }  // the same stage of every pipeline

  // Balances the stages' layers by the memory planner (plan_pipeline_stages, or for an
  // encoder-decoder both stacks at once, plan_encoder_decoder_stages: weights, gradients,
  // optimizer state and the activations each stage keeps under the schedule) for a model of
  // config mc (a stage's shard's under tensor parallelism); the same on every rank. Before shard().
  void balance(const ModelConfig& mc, const TrainConfig& cfg);
  const PipelineBounds& bounds() const { return bounds_; }
  // Makes `m` this rank's stage (nothing when P = 1).
  void shard(Model& m) const;
  // A whole model's optimizer state ("kind.name" -> tensor), this stage's part under its names.
  std::map<std::string, Tensor> slice_state(const Model& stage, const std::map<std::string, Tensor>& state) const;

  // This pipeline's micro-batches of a step (`micros`, indices into the step's grad_accum)
  // through the schedule. `load(k)` gives micro-batch k (every stage loads it: stage 0 reads its
  // ids, the last stage its targets); `loss(batch, logits)` is the last stage's mean loss of
  // one; hooks.before_forward(k) sets its dropout seed; hooks.before_backward(last) and
  // hooks.after_backward() wrap each backward pass (the data-parallel gradient sums). Afterwards
  // every stage holds its gradients, scaled by 1/grad_accum. Returns (loss, tokens) per
  // micro-batch of the step (zeros for other pipelines'), the same on every stage.
  struct Hooks {
    std::function<void(std::int64_t)> before_forward;
    std::function<void(bool)> before_backward;
    std::function<void()> after_backward;
  };
  std::vector<double> step(Model& m, const std::vector<std::int64_t>& micros, std::int64_t grad_accum,
                           const std::function<MicroBatch(std::int64_t)>& load,
                           const std::function<Tensor(const MicroBatch&, const Tensor&)>& loss, const Hooks& hooks);
  // After the data-parallel sums: the parameters outside the layers take the sum over the
  // stages (rank order; stages that do not use one add zeros), so every stage updates them alike.
  void sum_shared_gradients(const Model& m, std::map<std::string, Tensor>& params) const;
  // The gradient norm as one process adds it up (every parameter's square in the whole model's
  // name order), for clip_grad_norm; `shards` sums a split parameter's square over the shards
  // of a tensor-parallel stage (TensorParallel::split_parameters).
  SplitParameters norm_terms(const Model& stage, const SplitParameters& shards) const;
  // This rank's part of a checkpoint: its stage's layers and their optimizer state under the
  // whole model's names (on a tensor-parallel stage, those its shard owns: tp.checkpoint_part);
  // stage 0 adds what every stage holds (embeddings, final norm, head).
  CheckpointPart checkpoint_part(const Model& stage, const Optimizer& opt, const TensorParallel& tp) const;
  // Every rank of this pipeline (its stages and their shards): the ranks that write a checkpoint.
  const dist::Group& model_group() const { return model_; }
  std::string summary(const Model& stage, std::int64_t micros) const;
  std::string timing() const;  // the measured bubble

 private:
  std::vector<double> step_encoder_decoder(Model& m, const std::vector<std::int64_t>& micros, std::int64_t grad_accum,
                                           const std::function<MicroBatch(std::int64_t)>& load,
                                           const std::function<Tensor(const MicroBatch&, const Tensor&)>& loss,
                                           const Hooks& hooks);
  // The end of a step: every stage gets the losses, and the step's timing is counted.
  std::vector<double> finish_step(std::vector<double> out, std::chrono::steady_clock::time_point t0, double waited,
                                  std::size_t micros);
  std::string ideal_bubble(std::int64_t micros) const;  // the schedule's, for M micro-batches
  dist::Group pp_, dp_, model_;  // this pipeline's stages; the same stage of every pipeline; the whole pipeline
  int stage_ = 0, stages_ = 1, shards_ = 1;  // shards: of each stage (tensor_parallel)
  bool one_f_one_b_ = true, encoder_decoder_ = false;
  double step_s_ = 0, wait_s_ = 0;
  std::int64_t steps_ = 0, micros_ = 0;
  PipelineBounds bounds_;                 // balance(): each stage's first layer, and the layer count
  std::vector<std::int64_t> stage_bytes_;  // ... and each stage's planned peak
  bool balanced_ = true;                   // by memory (else pipeline_balance "even")
};

}  // namespace tfm::train_detail
