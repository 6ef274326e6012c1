// The data-parallel side of the training loop (mpirun -np N tfm train): which micro-batches
// this rank takes, summing gradients over the ranks, and ZeRO stage 1 (optimizer state
// sharded by parameter). On one process without bit_exact it does nothing at all, so a plain
// run is exactly what it was before.
//
// A step's global batch is grad_accum micro-batches of batch_size, G rows in all; rank r takes
// rows [r G / N, (r + 1) G / N), in pieces cut at the micro-batch boundaries. When N divides
// grad_accum those are whole micro-batches, each computed exactly as one process computes it.
// Otherwise a micro-batch is split across ranks (grad_accum 1 on 2 ranks: half of it each):
// each part sees its rows' dropout masks of the whole micro-batch, and its mean loss is
// weighted by its share of the micro-batch's loss terms (the target tokens that count), so
// the sum over the parts is the micro-batch's mean loss. Either way the summed gradient is one
// process's up to the order of the additions.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "dist/grad_sync.h"
#include "tfm/model.h"
#include "tfm/train.h"

namespace tfm::train_detail {

// Rows [first_row, first_row + rows) of micro-batch `micro` of a step.
struct MicroBatchPiece {
  std::int64_t micro = 0, first_row = 0, rows = 0;
};

class DataParallel {
 public:
  // `group`: the ranks that hold the same model (or the same tensor-parallel shard) and split
  // the batch between them; the whole job without model parallelism.
  DataParallel(const TrainConfig& cfg, std::map<std::string, Tensor>& params, dist::Group group = dist::world());
  int rank() const { return rank_; }
  int ranks() const { return ranks_; }
  bool writes() const { return rank_ == 0; }           // the first replica (see the trainer for model parallelism)
  const std::vector<MicroBatchPiece>& pieces() const { return pieces_; }  // this rank's share of a step
  bool splits_micro_batches() const { return split_; }

  // Around each of this rank's micro-batch backward passes.
  void before_backward(bool last_of_step);
  void after_backward();
  // After the last: the gradients become the sums over all ranks.
  void sum_gradients();
  // The optimizer step: all parameters, or with ZeRO-1 this rank's share followed by every
  // rank's updated parameters broadcast from their owners.
  void optimizer_step(Optimizer& opt, std::map<std::string, Tensor>& params, double lr);
  // ZeRO-1 after loading a checkpoint: keeps only this rank's share of the state.
  void shard_optimizer_state(Optimizer& opt, const std::map<std::string, Tensor>& params);
  // ZeRO-1 before saving: the whole state, gathered on rank 0 (every rank must call it);
  // nullopt without ZeRO (save the optimizer itself).
  std::optional<Optimizer> gathered_optimizer(const Optimizer& opt, const std::map<std::string, Tensor>& params);
  // Fails unless every rank holds bit-identical parameters (same checkpoint, same init).
  void check_same_model(const std::map<std::string, Tensor>& params, const std::string& what);
  // Values per micro-batch of a step (this rank's parts, zeros elsewhere), summed over the
  // ranks. Whole micro-batches come from one rank each, so the sums are exact.
  std::vector<double> sum_per_micro(std::vector<double> mine) const;
  bool stop_requested(bool mine) const;  // any rank wants to stop
  std::string summary(const OptimizerConfig& ocfg, const std::map<std::string, Tensor>& params) const;
  std::string timing() const;  // all-reduce waits, for the end of the run

 private:
  dist::Group group_;
  int rank_ = 0, ranks_ = 1;
  std::int64_t micros_ = 1, batch_ = 1;
  std::vector<MicroBatchPiece> pieces_;
  bool split_ = false;
  bool zero_ = false, bit_exact_ = false;
  double bucket_mb_ = 4.0;
  bool overlap_ = true;
  std::unique_ptr<dist::GradSync> sync_;
  std::unique_ptr<dist::TreeSum> tree_;
  std::map<std::string, int> owner_;  // ZeRO-1: the rank that updates each parameter
};

}  // namespace tfm::train_detail
