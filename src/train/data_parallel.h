// The data-parallel side of the training loop (mpirun -np N tfm train): which micro-batches
// this rank takes, summing gradients over the ranks, and ZeRO stage 1 (optimizer state
// sharded by parameter). On one process without bit_exact it does nothing at all, so a plain
// run is exactly what it was before.
//
// A step's global batch is grad_accum micro-batches of batch_size; rank r takes the
// contiguous block of grad_accum / N of them starting at r * grad_accum / N. Each micro-batch
// (its sequences, padding, dropout masks, loss scaling) is computed exactly as one process
// computes it, so the summed gradient is one process's up to the order of the additions.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "dist/grad_sync.h"
#include "tfm/model.h"
#include "tfm/train.h"

namespace tfm::train_detail {

class DataParallel {
 public:
  DataParallel(const TrainConfig& cfg, std::map<std::string, Tensor>& params);
  int rank() const { return rank_; }
  int ranks() const { return ranks_; }
  bool writes() const { return rank_ == 0; }           // checkpoints, metrics, curves, progress
  std::int64_t first_micro() const { return first_; }  // this rank's micro-batches of a step
  std::int64_t local_micros() const { return local_; }

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
  // The summed losses (and token counts) of a step: every rank's micro-batch values in
  // micro-batch order, so the sum is one process's to the last bit.
  void gather_micro_values(const std::vector<double>& mine, std::vector<double>& all) const;
  bool stop_requested(bool mine) const;  // any rank wants to stop
  std::string summary(const OptimizerConfig& ocfg, const std::map<std::string, Tensor>& params) const;
  std::string timing() const;  // all-reduce waits, for the end of the run

 private:
  int rank_ = 0, ranks_ = 1;
  std::int64_t micros_ = 1, first_ = 0, local_ = 1;
  bool zero_ = false, bit_exact_ = false;
  double bucket_mb_ = 4.0;
  bool overlap_ = true;
  std::unique_ptr<dist::GradSync> sync_;
  std::unique_ptr<dist::TreeSum> tree_;
  std::map<std::string, int> owner_;  // ZeRO-1: the rank that updates each parameter
};

}  // namespace tfm::train_detail
