// Summing parameter gradients over the ranks of a data-parallel run.
//
// GradSync (the default) overlaps communication with the backward pass, as PyTorch's DDP
// does: the first backward pass it watches is a probe that counts how many contributions each
// parameter's gradient receives and in which order the gradients become final; parameters are
// then grouped in that order into buckets of about `bucket_bytes`. In every later pass a
// leaf-gradient hook (autograd::set_leaf_grad_hook) notices when a bucket's last gradient is
// final, copies the bucket into a flat buffer and starts a non-blocking all-reduce of it while
// the backward pass goes on into the earlier layers. finish() waits for the rest.
//
// TreeSum (the bit-exact mode) keeps each micro-batch's gradients apart and adds them in a
// fixed balanced binary tree: pairwise within a rank, then across ranks by recursive doubling
// (rank r with r^1, then r^2, ...; float addition is commutative, so both partners get the
// same bits). With G micro-batches per step and N ranks, both powers of two and N <= G, the
// tree is the same for every N, so the sums are bit-identical to one process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "dist/comm.h"
#include "tfm/autograd.h"
#include "tfm/tensor.h"

namespace tfm::dist {

class GradSync {
 public:
  // `params`: every trainable parameter, in the same order on every rank. overlap = false
  // starts every bucket after the backward pass instead (to measure what overlap hides).
  GradSync(std::vector<std::pair<std::string, Tensor>> params, std::size_t bucket_bytes, bool overlap = true,
           Group group = world());
  ~GradSync();
  GradSync(const GradSync&) = delete;
  GradSync& operator=(const GradSync&) = delete;

  // Call right before the backward pass that completes this rank's gradients for the step
  // (its last micro-batch); finish() right after it. Gradients are then the sums over ranks.
  void arm();
  void finish();

  std::size_t buckets() const { return buckets_.size(); }
  // Time finish() spent waiting for the reductions, over the steps after the probe.
  double wait_seconds() const { return wait_s_; }
  std::int64_t steps() const { return steps_; }

 private:
  struct Bucket {
    std::vector<int> params;   // indices into params_, in readiness order
    std::vector<float> flat;   // (sum of their numels)
    int pending = 0;           // gradients not final yet in this pass
    bool started = false;
    Allreduce reduce;
  };
  void on_grad(AutogradMeta* meta);
  void plan();          // buckets from the probe pass
  void start(Bucket& b);
  void start_ready();   // starts buckets in order while the next one is complete

  std::vector<std::pair<std::string, Tensor>> params_;
  std::unordered_map<const AutogradMeta*, int> index_;
  std::size_t bucket_bytes_;
  bool overlap_;
  bool planned_ = false;
  std::vector<int> seen_, expected_, bucket_of_;
  std::vector<int> probe_order_;  // param index of every accumulation in the probe pass
  std::vector<Bucket> buckets_;
  std::size_t next_ = 0;          // the next bucket to start (buckets start in order on every rank)
  std::string broken_;            // a parameter that received more contributions than planned
  double wait_s_ = 0;
  std::int64_t steps_ = 0;
  Group group_;
};

class TreeSum {
 public:
  explicit TreeSum(std::vector<std::pair<std::string, Tensor>> params, Group group = world());
  // After each micro-batch's backward pass: takes the parameters' gradients into the tree
  // and clears them.
  void add_micro_batch();
  // After the last: sums over the ranks and writes the result into the gradients.
  void finish();

 private:
  std::vector<std::pair<std::string, Tensor>> params_;
  std::size_t total_ = 0;
  std::vector<std::pair<int, std::vector<float>>> stack_;  // (tree level, flat gradients)
  std::vector<bool> has_grad_;  // parameters that received a gradient this step
  Group group_;
};

// Requirements of TreeSum, checked before training starts: an error naming the config key
// when `micro_batches` (per step, all ranks) and `ranks` do not allow the fixed tree.
void check_tree_sum(std::int64_t micro_batches, int ranks, const std::string& where);

}  // namespace tfm::dist
