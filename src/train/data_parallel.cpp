// Data parallelism in the training loop: micro-batch sharding, gradient sums, ZeRO-1.
// data_parallel.h describes the scheme.
#include "train/data_parallel.h"

#include <cstring>

#include "dist/comm.h"
#include "tfm/autograd.h"
#include "tfm/error.h"

namespace tfm::train_detail {
namespace {

// The parameters that train (a frozen base under LoRA does not), in name order.
std::vector<std::pair<std::string, Tensor>> trainable(const std::map<std::string, Tensor>& params) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [name, p] : params)
    if (p.requires_grad()) out.emplace_back(name, p);
  return out;
}

// Optimizer state tensors per parameter element: AdamW's two moments, SGD's momentum buffer.
int state_per_element(const OptimizerConfig& o) {
  if (o.kind == OptimizerKind::adamw) return 2;
  return o.momentum != 0.0 ? 1 : 0;
}

std::vector<std::string> state_kinds(const OptimizerConfig& o) {
  if (o.kind == OptimizerKind::adamw) return {"exp_avg", "exp_avg_sq"};
  return {"momentum"};
}

std::string mib(double bytes) {
  char buf[32];
  if (bytes < 1024.0 * 1024.0) std::snprintf(buf, sizeof buf, "%.1f KiB", bytes / 1024.0);
  else std::snprintf(buf, sizeof buf, "%.2f MiB", bytes / (1024.0 * 1024.0));
  return buf;
}

}  // namespace

DataParallel::DataParallel(const TrainConfig& cfg, std::map<std::string, Tensor>& params, dist::Group group)
    : group_(group), rank_(group.rank), ranks_(group.size), micros_(cfg.grad_accum), batch_(cfg.batch_size),
      zero_(cfg.zero_optimizer && ranks_ > 1), bit_exact_(cfg.bit_exact), bucket_mb_(cfg.bucket_mb),
      overlap_(cfg.overlap_grad_sync) {
  const std::int64_t rows = micros_ * batch_;
  TFM_CHECK(rows >= ranks_, cfg.source, "training.batch_size x grad_accum = ", rows, " examples per step cannot feed ",
            ranks_, " ranks (each needs at least one)");
  split_ = micros_ % ranks_ != 0;
  TFM_CHECK(!(split_ && bit_exact_), cfg.source, ".distributed.bit_exact: the bit-exact reduction sums whole "
            "micro-batches, and training.grad_accum ", micros_, " is not a multiple of the ", ranks_, " ranks");
  // This rank's rows of the step, cut where micro-batches end.
  const std::int64_t lo = rows * rank_ / ranks_, hi = rows * (rank_ + 1) / ranks_;
  for (std::int64_t at = lo; at < hi;) {
    const std::int64_t micro = at / batch_, end = std::min(hi, (micro + 1) * batch_);
    pieces_.push_back({micro, at - micro * batch_, end - at});
    at = end;
  }
  if (bit_exact_) {
    dist::check_tree_sum(micros_, ranks_, cfg.source + ".distributed.bit_exact: ");
    tree_ = std::make_unique<dist::TreeSum>(trainable(params), group_);
  } else if (ranks_ > 1) {
    sync_ = std::make_unique<dist::GradSync>(trainable(params), static_cast<std::size_t>(bucket_mb_ * 1024 * 1024),
                                             overlap_, group_);
  }
  if (zero_) {  // contiguous runs of trainable parameters in name order, about 1/N of the elements each
    std::int64_t total = 0, seen = 0;
    const auto list = trainable(params);
    for (const auto& [name, p] : list) total += p.numel();
    for (const auto& [name, p] : params) owner_[name] = 0;  // frozen: no state, never updated
    for (const auto& [name, p] : list) {
      const double mid = static_cast<double>(seen) + static_cast<double>(p.numel()) / 2.0;
      owner_[name] = std::min(ranks_ - 1, static_cast<int>(mid * ranks_ / static_cast<double>(total)));
      seen += p.numel();
    }
  }
}

void DataParallel::before_backward(bool last_of_step) {
  if (sync_ && last_of_step) sync_->arm();
}

void DataParallel::after_backward() {
  if (tree_) tree_->add_micro_batch();
}

void DataParallel::sum_gradients() {
  if (tree_) tree_->finish();
  else if (sync_) sync_->finish();
}

void DataParallel::optimizer_step(Optimizer& opt, std::map<std::string, Tensor>& params, double lr) {
  if (!zero_) {
    opt.step(params, lr);
    return;
  }
  std::map<std::string, Tensor> mine;
  for (auto& [name, p] : params)
    if (owner_.at(name) == rank_) mine.emplace(name, p);
  opt.step(mine, lr);
  for (auto& [name, p] : params)  // every rank's update, from its owner
    if (p.grad().defined()) dist::broadcast(p.data<float>(), static_cast<std::size_t>(p.numel()) * sizeof(float), owner_.at(name), group_);
}

void DataParallel::shard_optimizer_state(Optimizer& opt, const std::map<std::string, Tensor>& params) {
  if (!zero_) return;
  std::map<std::string, Tensor> st = opt.state();
  for (auto it = st.begin(); it != st.end();) {
    const std::string name = it->first.substr(it->first.find('.') + 1);
    it = owner_.at(name) == rank_ ? std::next(it) : st.erase(it);
  }
  opt.load_state(st, opt.steps_taken(), params);
}

std::optional<Optimizer> DataParallel::gathered_optimizer(const Optimizer& opt,
                                                          const std::map<std::string, Tensor>& params) {
  if (!zero_) return std::nullopt;
  const std::map<std::string, Tensor> st = opt.state();
  std::map<std::string, Tensor> full;
  for (const auto& [name, p] : params) {
    const int owner = owner_.at(name);
    for (const std::string& kind : state_kinds(opt.config())) {
      const std::string key = kind + "." + name;
      const auto it = st.find(key);
      std::int64_t present = rank_ == owner && it != st.end() ? 1 : 0;
      dist::broadcast(&present, sizeof present, owner, group_);
      if (!present) continue;
      Tensor t = rank_ == owner ? it->second.clone() : Tensor::zeros(p.shape());
      dist::broadcast(t.data<float>(), static_cast<std::size_t>(t.numel()) * sizeof(float), owner, group_);
      if (rank_ == 0) full.emplace(key, t);
    }
  }
  Optimizer whole(opt.config());
  if (rank_ == 0) whole.load_state(full, opt.steps_taken(), params);
  return whole;
}

void DataParallel::check_same_model(const std::map<std::string, Tensor>& params, const std::string& what) {
  if (ranks_ == 1) return;
  std::uint64_t h = 1469598103934665603ull;
  for (const auto& [name, p] : params) {
    const auto* w = reinterpret_cast<const std::uint32_t*>(p.data<float>());
    for (std::int64_t i = 0; i < p.numel(); ++i) h = (h ^ w[i]) * 1099511628211ull;
    h = (h ^ 0x5bd1e995u) * 1099511628211ull;
  }
  const auto mine = static_cast<std::int64_t>(h >> 1);
  TFM_CHECK(dist::allreduce_max(mine, group_) == mine && -dist::allreduce_max(-mine, group_) == mine, "distributed", what,
            ": the ranks hold different parameters (every rank must resume from the same checkpoint: a shared "
            "directory or identical copies)");
}

std::vector<double> DataParallel::sum_per_micro(std::vector<double> mine) const {
  if (ranks_ > 1) dist::allreduce_sum(mine.data(), mine.size(), group_);
  return mine;
}

bool DataParallel::stop_requested(bool mine) const { return dist::allreduce_max(mine ? 1 : 0) != 0; }

std::string DataParallel::summary(const OptimizerConfig& ocfg, const std::map<std::string, Tensor>& params) const {
  if (!dist::launched() && !bit_exact_) return "";
  // With tensor parallelism the data-parallel group is the replicas, not the ranks.
  std::string s = ranks_ == dist::size() ? "ranks: " + std::to_string(ranks_) : "data-parallel replicas: " + std::to_string(ranks_);
  s += (dist::launched() ? " (" + dist::describe() + ")" : "") + std::string(", ");
  if (split_) {
    std::int64_t mine = 0;
    for (const MicroBatchPiece& p : pieces_) mine += p.rows;
    s += std::to_string(mine) + " of " + std::to_string(micros_ * batch_) + " examples per step on rank " +
         std::to_string(rank_) + " (micro-batches of " + std::to_string(batch_) + " split across ranks), ";
  } else {
    s += std::to_string(pieces_.size()) + " of " + std::to_string(micros_) + " micro-batches per rank per step, ";
  }
  if (bit_exact_) s += "bit-exact tree reduction";
  else if (ranks_ > 1) s += "gradient buckets of " + mib(bucket_mb_ * 1024 * 1024) + (overlap_ ? " overlapped with backward" : " after backward");
  else s += "no gradient exchange";
  if (zero_) {
    double all = 0, own = 0, largest = 0;
    std::vector<double> per(static_cast<std::size_t>(ranks_), 0.0);
    for (const auto& [name, p] : trainable(params)) {
      const double b = static_cast<double>(p.numel()) * 4.0 * state_per_element(ocfg);
      all += b;
      per[static_cast<std::size_t>(owner_.at(name))] += b;
    }
    own = per[static_cast<std::size_t>(rank_)];
    for (double v : per) largest = std::max(largest, v);
    s += "; ZeRO-1: optimizer state " + mib(own) + " on rank " + std::to_string(rank_) + " (largest share " +
         mib(largest) + ") instead of " + mib(all) + ", saves " + mib(all - largest) + " per rank";
  } else if (ranks_ > 1) {
    s += "; optimizer state replicated";
  }
  return s;
}

std::string DataParallel::timing() const {
  if (!sync_ || sync_->steps() == 0) return "";
  char buf[160];
  std::snprintf(buf, sizeof buf, "all-reduce: %zu buckets, %.2f ms per step waited after the backward pass",
                sync_->buckets(), 1e3 * sync_->wait_seconds() / static_cast<double>(sync_->steps()));
  return buf;
}

}  // namespace tfm::train_detail
