// Gradient summation over ranks: overlapped buckets (GradSync) and the fixed-order tree
// (TreeSum). grad_sync.h explains both.
#include "dist/grad_sync.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "tfm/error.h"

namespace tfm::dist {
namespace {

std::vector<float>& grow(std::vector<float>& v, std::size_t n) {
  if (v.size() != n) v.assign(n, 0.0f);
  return v;
}

void set_grad(const Tensor& p, const float* src) {
  Tensor g = Tensor::empty(p.shape());  // fresh: the old buffer may be shared by handle
  std::memcpy(g.data<float>(), src, static_cast<std::size_t>(p.numel()) * sizeof(float));
  p.autograd_meta()->grad = g;
}

bool is_power_of_two(std::int64_t v) { return v > 0 && (v & (v - 1)) == 0; }

}  // namespace

GradSync::GradSync(std::vector<std::pair<std::string, Tensor>> params, std::size_t bucket_bytes, bool overlap,
                   Group group)
    : params_(std::move(params)), bucket_bytes_(std::max<std::size_t>(bucket_bytes, sizeof(float))), overlap_(overlap),
      group_(group) {
  for (std::size_t i = 0; i < params_.size(); ++i) {
    const Tensor& p = params_[i].second;
    TFM_CHECK(p.autograd_meta() != nullptr && p.dtype() == DType::f32 && p.is_contiguous(), "distributed",
              "parameter '", params_[i].first, "' must be a contiguous f32 tensor that requires grad");
    index_[p.autograd_meta()] = static_cast<int>(i);
  }
  seen_.assign(params_.size(), 0);
}

GradSync::~GradSync() { autograd::set_leaf_grad_hook({}); }

void GradSync::arm() {
  std::fill(seen_.begin(), seen_.end(), 0);
  probe_order_.clear();
  broken_.clear();
  next_ = 0;
  for (Bucket& b : buckets_) {
    b.pending = static_cast<int>(b.params.size());
    b.started = false;
  }
  autograd::set_leaf_grad_hook([this](AutogradMeta* m) { on_grad(m); });
}

void GradSync::on_grad(AutogradMeta* meta) {
  const auto it = index_.find(meta);
  if (it == index_.end()) return;  // a leaf that is not a parameter
  const int i = it->second;
  ++seen_[static_cast<std::size_t>(i)];
  if (!planned_) {
    probe_order_.push_back(i);
    return;
  }
  const int want = expected_[static_cast<std::size_t>(i)];
  if (seen_[static_cast<std::size_t>(i)] > want) {
    if (broken_.empty()) broken_ = params_[static_cast<std::size_t>(i)].first;
    return;
  }
  if (seen_[static_cast<std::size_t>(i)] == want && overlap_) {
    --buckets_[static_cast<std::size_t>(bucket_of_[static_cast<std::size_t>(i)])].pending;
    start_ready();
  }
  // MPI moves non-blocking collectives on only inside MPI calls: poke the oldest one.
  for (std::size_t b = 0; b < next_; ++b)
    if (!buckets_[b].reduce.test()) break;
}

void GradSync::start(Bucket& b) {
  std::size_t off = 0;
  for (int i : b.params) {
    const Tensor& p = params_[static_cast<std::size_t>(i)].second;
    const Tensor g = p.grad();
    const auto n = static_cast<std::size_t>(p.numel());
    std::memcpy(b.flat.data() + off, g.data<float>(), n * sizeof(float));
    off += n;
  }
  b.reduce = Allreduce(b.flat.data(), b.flat.size(), group_);
  b.started = true;
}

void GradSync::start_ready() {
  while (next_ < buckets_.size() && buckets_[next_].pending == 0) start(buckets_[next_++]);
}

void GradSync::plan() {
  expected_ = seen_;
  // Readiness order: where each parameter received its last contribution.
  std::vector<int> last(params_.size(), -1);
  for (std::size_t k = 0; k < probe_order_.size(); ++k) last[static_cast<std::size_t>(probe_order_[k])] = static_cast<int>(k);
  std::vector<int> order;
  for (std::size_t i = 0; i < params_.size(); ++i)
    if (expected_[i] > 0) order.push_back(static_cast<int>(i));
  std::sort(order.begin(), order.end(), [&](int a, int b) { return last[static_cast<std::size_t>(a)] < last[static_cast<std::size_t>(b)]; });
  bucket_of_.assign(params_.size(), -1);
  buckets_.clear();
  std::size_t bytes = 0;
  for (int i : order) {
    if (buckets_.empty() || bytes >= bucket_bytes_) {
      buckets_.emplace_back();
      bytes = 0;
    }
    buckets_.back().params.push_back(i);
    bucket_of_[static_cast<std::size_t>(i)] = static_cast<int>(buckets_.size() - 1);
    bytes += static_cast<std::size_t>(params_[static_cast<std::size_t>(i)].second.numel()) * sizeof(float);
  }
  std::uint64_t h = 1469598103934665603ull;  // FNV-1a over the plan: every rank must agree
  for (Bucket& b : buckets_) {
    std::size_t n = 0;
    for (int i : b.params) {
      n += static_cast<std::size_t>(params_[static_cast<std::size_t>(i)].second.numel());
      h = (h ^ static_cast<std::uint64_t>(i)) * 1099511628211ull;
    }
    h = (h ^ 0xffu) * 1099511628211ull;
    grow(b.flat, n);
  }
  const auto mine = static_cast<std::int64_t>(h >> 1);
  TFM_CHECK(allreduce_max(mine, group_) == mine && -allreduce_max(-mine, group_) == mine, "distributed",
            "the ranks saw different backward passes (their gradient bucket plans differ); every rank must train "
            "the same model");
  planned_ = true;
}

void GradSync::finish() {
  autograd::set_leaf_grad_hook({});
  const bool probe = !planned_;  // not timed: it reduces everything after the backward pass
  if (!planned_) {
    plan();
    for (Bucket& b : buckets_) b.pending = 0;
  } else {
    for (std::size_t i = 0; i < params_.size(); ++i)
      if (seen_[i] != expected_[i] && broken_.empty()) broken_ = params_[i].first;
    if (!broken_.empty()) {
      for (std::size_t b = 0; b < next_; ++b) buckets_[b].reduce.wait();
      const auto i = static_cast<std::size_t>(std::find_if(params_.begin(), params_.end(), [&](const auto& p) {
                       return p.first == broken_;
                     }) - params_.begin());
      fail("distributed", "parameter '", broken_, "' received ", seen_[i], " gradient contributions in this backward "
           "pass but ", expected_[i], " in the first; the overlap plan no longer holds");
    }
  }
  while (next_ < buckets_.size()) start(buckets_[next_++]);
  const auto t0 = std::chrono::steady_clock::now();
  for (Bucket& b : buckets_) b.reduce.wait();
  if (!probe) wait_s_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (Bucket& b : buckets_) {
    std::size_t off = 0;
    for (int i : b.params) {
      const Tensor& p = params_[static_cast<std::size_t>(i)].second;
      set_grad(p, b.flat.data() + off);
      off += static_cast<std::size_t>(p.numel());
    }
  }
  if (!probe) ++steps_;
}

TreeSum::TreeSum(std::vector<std::pair<std::string, Tensor>> params, Group group)
    : params_(std::move(params)), group_(group) {
  for (const auto& [name, p] : params_) total_ += static_cast<std::size_t>(p.numel());
}

void TreeSum::add_micro_batch() {
  std::vector<float> flat(total_, 0.0f);
  std::size_t off = 0;
  if (has_grad_.empty()) has_grad_.assign(params_.size(), false);
  for (std::size_t k = 0; k < params_.size(); ++k) {
    Tensor& p = params_[k].second;
    const Tensor g = p.grad();
    const auto n = static_cast<std::size_t>(p.numel());
    if (g.defined()) {
      std::memcpy(flat.data() + off, g.data<float>(), n * sizeof(float));
      has_grad_[k] = true;
    }
    p.zero_grad();
    off += n;
  }
  stack_.emplace_back(0, std::move(flat));
  while (stack_.size() >= 2 && stack_[stack_.size() - 1].first == stack_[stack_.size() - 2].first) {
    auto& left = stack_[stack_.size() - 2];
    const auto& right = stack_.back().second;
    for (std::size_t i = 0; i < total_; ++i) left.second[i] = left.second[i] + right[i];
    ++left.first;
    stack_.pop_back();
  }
}

void TreeSum::finish() {
  TFM_CHECK(stack_.size() == 1, "distributed", "bit-exact reduction needs a power-of-two number of micro-batches "
            "per rank, got a tree of ", stack_.size(), " parts");
  std::vector<float>& sum = stack_.back().second;
  std::vector<float> other(total_);
  for (int d = 1; d < group_.size; d <<= 1) {
    exchange(sum.data(), other.data(), total_, group_.rank ^ d, group_);
    for (std::size_t i = 0; i < total_; ++i) sum[i] = sum[i] + other[i];
  }
  std::size_t off = 0;
  for (std::size_t k = 0; k < params_.size(); ++k) {
    const Tensor& p = params_[k].second;
    if (has_grad_[k]) set_grad(p, sum.data() + off);  // a parameter no micro-batch reached keeps none
    off += static_cast<std::size_t>(p.numel());
  }
  stack_.clear();
  has_grad_.clear();
}

void check_tree_sum(std::int64_t micro_batches, int ranks, const std::string& where) {
  TFM_CHECK(is_power_of_two(micro_batches), where, "bit-exact reduction needs training.grad_accum to be a power of "
            "two, got ", micro_batches);
  TFM_CHECK(is_power_of_two(ranks), where, "bit-exact reduction needs a power-of-two number of ranks, got ", ranks);
}

}  // namespace tfm::dist
