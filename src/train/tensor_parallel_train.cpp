#include "train/tensor_parallel_train.h"

#include <algorithm>
#include <cstdio>
#include <vector>

#include "tfm/error.h"

namespace tfm::train_detail {

TensorParallel::TensorParallel(const TrainConfig& cfg) {
  const auto t = static_cast<int>(cfg.tensor_parallel);
  const int n = dist::size(), model_ranks = t * static_cast<int>(cfg.pipeline_parallel);
  TFM_CHECK(n % t == 0, cfg.source, ".distributed.tensor_parallel ", t, " does not divide the ", n, " ranks (the ranks "
            "form replicas of ", t, " shards each)");
  if (t > 1) {
    TFM_CHECK(cfg.gradient_noise == 0, cfg.source, ".training.gradient_noise is not drawn per shard: it cannot be "
              "used with distributed.tensor_parallel");
    TFM_CHECK(!cfg.distill, cfg.source, ": distillation with distributed.tensor_parallel is not supported");
    TFM_CHECK(!cfg.lora && !cfg.bottleneck && !cfg.prefix, cfg.source, ": ", cfg.lora ? "LoRA" : cfg.bottleneck ?
              "bottleneck adapters" : "prefix tuning", " with distributed.tensor_parallel is not supported (the "
              "adapters are not split)");
  }
  // Consecutive ranks share a replica: its shards talk every sub-layer, so they should sit on
  // one machine (mpirun places consecutive ranks together). With pipeline_parallel P a replica
  // is P stages of T shards (rank = replica * P T + stage * T + shard; pipeline_train.h).
  const int r = dist::rank();
  if (t == n) {  // one replica (a default group is this rank alone)
    tp_ = dist::world();
  } else if (model_ranks == 1) {
    dp_ = dist::world();
  } else {
    if (t > 1) tp_ = dist::split(r / t, r % t);
    if (n % model_ranks == 0) dp_ = dist::split(r % model_ranks, r / model_ranks);  // (else PipelineParallel says why)
  }
}

Model::PartialSum partial_sum_over(const dist::Group& g) {
  return [g](Tensor& x) {
    TFM_CHECK(x.is_contiguous() && x.dtype() == DType::f32, "tensor parallel", "summing ", x.str());
    dist::allreduce_sum_ordered(x.data<float>(), static_cast<std::size_t>(x.numel()), g);
  };
}

Model::PipeComm pipe_comm_over(const dist::Group& g) {
  Model::PipeComm comm;
  comm.send = [g](const Tensor& x, int to) { dist::send(x.data<float>(), static_cast<std::size_t>(x.numel()), to, g); };
  comm.recv = [g](Tensor& x, int from) { dist::recv(x.data<float>(), static_cast<std::size_t>(x.numel()), from, g); };
  comm.broadcast = [g](Tensor& x, int root) { dist::broadcast(x.data<float>(), x.nbytes(), root, g); };
  return comm;
}

void TensorParallel::shard(Model& m) const {
  if (!on()) return;
  const dist::Group g = tp_;
  m.shard_tensor_parallel(tp_.rank, tp_.size, [sum = partial_sum_over(g), counts = counts_](Tensor& x) {
    sum(x);
    ++counts->sums;
    counts->floats += x.numel();
  });
}

std::map<std::string, Tensor> TensorParallel::slice_state(const Model& shard,
                                                          const std::map<std::string, Tensor>& state) const {
  if (!on()) return state;
  std::map<std::string, Tensor> out;
  for (const auto& [key, t] : state) {
    const auto dot = key.find('.');
    out[key] = dot == std::string::npos ? t : shard.tensor_parallel_slice(key.substr(dot + 1), t);
  }
  return out;
}

CheckpointPart TensorParallel::checkpoint_part(const Model& shard, const Optimizer& opt) const {
  CheckpointPart part{on() ? shard.tensor_parallel_whole_config() : shard.config(), {}, {}, opt.steps_taken()};
  const std::map<std::string, Tensor> params = shard.parameters();
  // The whole sizes, summed over the shards: every shard then computes the same owners.
  std::vector<double> size;
  for (const auto& [name, t] : params)
    size.push_back(static_cast<double>(t.numel()) / (shard.tensor_parallel_split(name) ? 1.0 : tp_.size));
  dist::allreduce_sum(size.data(), size.size(), tp_);
  std::vector<std::size_t> order(size.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return size[a] > size[b]; });
  std::vector<double> load(static_cast<std::size_t>(tp_.size), 0.0);
  std::vector<int> owner_of(size.size(), 0);
  for (const std::size_t i : order) {
    const auto least = std::min_element(load.begin(), load.end()) - load.begin();
    owner_of[i] = static_cast<int>(least);
    load[static_cast<std::size_t>(least)] += size[i];
  }
  std::map<std::string, int> owner;
  std::size_t i = 0;
  for (const auto& [name, t] : params) {
    owner[name] = owner_of[i++];
    Tensor whole = shard.tensor_parallel_gather(name, t);  // collective for a split one
    if (owner[name] == tp_.rank) part.params[name] = std::move(whole);
  }
  for (const auto& [key, t] : opt.state()) {  // the same keys in the same order on every shard
    const auto dot = key.find('.');
    const std::string name = dot == std::string::npos ? std::string() : key.substr(dot + 1);
    const auto it = owner.find(name);
    Tensor whole = it == owner.end() ? t : shard.tensor_parallel_gather(name, t);
    if ((it == owner.end() ? 0 : it->second) == tp_.rank) part.state[key] = std::move(whole);
  }
  return part;
}

SplitParameters TensorParallel::split_parameters(const Model& shard) const {
  const dist::Group g = tp_;
  SplitParameters sp;
  sp.split = [&shard](const std::string& name) { return shard.tensor_parallel_split(name); };
  sp.sum_split = [g](double v) {
    dist::allreduce_sum(&v, 1, g);
    return v;
  };
  return sp;
}

std::string TensorParallel::summary(const Model& shard) const {
  if (!on()) return "";
  std::int64_t split = 0, whole = 0;
  for (const auto& [name, p] : shard.parameters()) (shard.tensor_parallel_split(name) ? split : whole) += p.numel();
  double all_split = static_cast<double>(split);  // summed: a vocabulary's shards may differ by a row
  dist::allreduce_sum(&all_split, 1, tp_);
  return "tensor parallel: " + std::to_string(tp_.size) + " shards per replica, " + std::to_string(dp_.size) +
         (dp_.size == 1 ? " replica" : " replicas") + "; shard " + std::to_string(tp_.rank) + " holds " +
         std::to_string(split) + " split and " + std::to_string(whole) + " whole parameters (" +
         std::to_string(static_cast<std::int64_t>(all_split) + whole) + (shard.pipeline_stages() > 1 ? " in the stage)" : " in the model)");
}

void TensorParallel::step_end() {
  in_steps_.sums += counts_->sums - at_begin_.sums;
  in_steps_.floats += counts_->floats - at_begin_.floats;
  ++steps_;
}

std::string TensorParallel::traffic() const {
  if (!on() || steps_ == 0) return "";
  const double per = 1.0 / static_cast<double>(steps_);
  char buf[200];
  std::snprintf(buf, sizeof buf, "tensor-parallel sums: %.1f per training step, %.2f MiB of partial sums each step "
                "(every rank sends its part to the %d others)", static_cast<double>(in_steps_.sums) * per,
                static_cast<double>(in_steps_.floats) * 4.0 * per / (1024.0 * 1024.0), tp_.size - 1);
  return buf;
}

}  // namespace tfm::train_detail
