#include "train/tensor_parallel_train.h"

#include <cstdio>

#include "tfm/error.h"

namespace tfm::train_detail {

TensorParallel::TensorParallel(const TrainConfig& cfg) {
  const auto t = static_cast<int>(cfg.tensor_parallel);
  const int n = dist::size();
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
  // one machine (mpirun places consecutive ranks together).
  const int r = dist::rank();
  if (t == n) {  // one replica (a default group is this rank alone)
    tp_ = dist::world();
  } else if (t == 1) {
    dp_ = dist::world();
  } else {
    tp_ = dist::split(r / t, r % t);
    dp_ = dist::split(r % t, r / t);
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

WholeModel whole_model(Model whole, const std::map<std::string, Tensor>& state, const Optimizer& like) {
  Optimizer o(like.config());
  o.load_state(state, like.steps_taken(), whole.parameters());
  return WholeModel{std::move(whole), std::move(o)};
}

std::optional<WholeModel> TensorParallel::gather(const Model& shard, const Optimizer& opt) const {
  if (!on()) return std::nullopt;
  Model whole = shard.tensor_parallel_whole();
  std::map<std::string, Tensor> state;
  for (const auto& [key, t] : opt.state()) {  // the same keys in the same order on every shard
    const auto dot = key.find('.');
    state[key] = dot == std::string::npos ? t : shard.tensor_parallel_gather(key.substr(dot + 1), t);
  }
  return whole_model(std::move(whole), state, opt);
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
  return "tensor parallel: " + std::to_string(tp_.size) + " shards per replica, " + std::to_string(dp_.size) +
         (dp_.size == 1 ? " replica" : " replicas") + "; shard " + std::to_string(tp_.rank) + " holds " +
         std::to_string(split) + " split and " + std::to_string(whole) + " whole parameters (" +
         std::to_string(split * tp_.size + whole) + " in the model)";
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
