// AdamW and SGD with PyTorch's exact update order (torch.optim, single-tensor path), and
// global-norm gradient clipping. Updates are element-wise: each element is computed by the
// same code whatever the thread count.
#include <cmath>
#include <vector>

#include "kernels/optimizer.h"
#include "kernels/random.h"
#include "kernels/parallel.h"
#include "tfm/autograd.h"
#include "tfm/error.h"
#include "tfm/train.h"

namespace tfm {
namespace {

constexpr std::int64_t kGrain = 1 << 14;

float* f32_data(const Tensor& t, const std::string& name, const char* what) {
  TFM_CHECK(t.dtype() == DType::f32 && t.is_contiguous(), "optimizer", what, " '", name,
            "' must be contiguous f32, got ", t.str());
  return t.data<float>();
}

}  // namespace

bool decays(const OptimizerConfig& cfg, const std::string& name, const Shape& shape) {
  if (shape.size() <= 1) return false;  // norm scales and biases
  for (const auto& pattern : cfg.no_decay)
    if (name.find(pattern) != std::string::npos) return false;
  return true;
}

Optimizer::Optimizer(OptimizerConfig cfg) : cfg_(std::move(cfg)) {
  TFM_CHECK(cfg_.lr >= 0 && cfg_.eps >= 0 && cfg_.weight_decay >= 0, "optimizer",
            "lr, eps and weight_decay must be >= 0");
  TFM_CHECK(cfg_.beta1 >= 0 && cfg_.beta1 < 1 && cfg_.beta2 >= 0 && cfg_.beta2 < 1, "optimizer",
            "betas must be in [0, 1), got ", cfg_.beta1, ", ", cfg_.beta2);
}

void Optimizer::step(std::map<std::string, Tensor>& params, double lr) {
  ++step_;
  for (auto& [name, p] : params) {
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    float* w = f32_data(p, name, "parameter");
    const float* gd = f32_data(g, name, "gradient");
    const std::int64_t n = p.numel();
    const double wd = decays(cfg_, name, p.shape()) ? cfg_.weight_decay : 0.0;
    if (cfg_.kind == OptimizerKind::adamw) {
      auto [mi, fresh_m] = m_.try_emplace(name, Tensor::zeros(p.shape()));
      auto [vi, fresh_v] = v_.try_emplace(name, Tensor::zeros(p.shape()));
      float* m = mi->second.data<float>();
      float* v = vi->second.data<float>();
      // torch.optim.AdamW: scalars are Python doubles, cast to float by the tensor kernels.
      kernels::AdamWScalars k;
      k.apply_decay = wd != 0.0;
      k.decay = static_cast<float>(1.0 - lr * wd);
      k.b1 = static_cast<float>(cfg_.beta1), k.a1 = static_cast<float>(1.0 - cfg_.beta1);
      k.b2 = static_cast<float>(cfg_.beta2), k.a2 = static_cast<float>(1.0 - cfg_.beta2);
      const double bc1 = 1.0 - std::pow(cfg_.beta1, static_cast<double>(step_));
      const double bc2 = 1.0 - std::pow(cfg_.beta2, static_cast<double>(step_));
      k.step_size = static_cast<float>(lr / bc1);
      k.bc2_sqrt = static_cast<float>(std::sqrt(bc2));
      k.eps = static_cast<float>(cfg_.eps);
      kernels::parallel_for(n, kGrain, [&](std::int64_t b, std::int64_t e) {
        kernels::adamw_update(w + b, gd + b, m + b, v + b, e - b, k);
      });
    } else {
      const float wdf = static_cast<float>(wd), mom = static_cast<float>(cfg_.momentum);
      const float neg_lr = static_cast<float>(-lr);
      auto it = m_.find(name);
      const bool first = it == m_.end();
      if (cfg_.momentum != 0.0 && first) it = m_.emplace(name, Tensor::zeros(p.shape())).first;
      float* buf = cfg_.momentum != 0.0 ? it->second.data<float>() : nullptr;
      kernels::parallel_for(n, kGrain, [&](std::int64_t b, std::int64_t e) {
        for (std::int64_t i = b; i < e; ++i) {
          float d = gd[i];
          if (wdf != 0.0f) d = d + wdf * w[i];               // d_p = g.add(p, alpha=wd)
          if (buf) {
            buf[i] = first ? d : buf[i] * mom + d;            // clone, then mul_(m).add_(d_p)
            d = cfg_.nesterov ? d + mom * buf[i] : buf[i];
          }
          w[i] = w[i] + neg_lr * d;                           // param.add_(d_p, alpha=-lr)
        }
      });
    }
  }
}

std::map<std::string, Tensor> Optimizer::state() const {
  std::map<std::string, Tensor> out;
  const bool adam = cfg_.kind == OptimizerKind::adamw;
  for (const auto& [name, t] : m_) out[(adam ? "exp_avg." : "momentum.") + name] = t;
  for (const auto& [name, t] : v_) out["exp_avg_sq." + name] = t;
  return out;
}

void Optimizer::load_state(const std::map<std::string, Tensor>& state, std::int64_t steps,
                           const std::map<std::string, Tensor>& params) {
  m_.clear();
  v_.clear();
  for (const auto& [key, t] : state) {
    const auto dot = key.find('.');
    TFM_CHECK(dot != std::string::npos, "optimizer", "bad state tensor name '", key, "'");
    const std::string kind = key.substr(0, dot), name = key.substr(dot + 1);
    const auto p = params.find(name);
    TFM_CHECK(p != params.end(), "optimizer", "state '", key, "' names no parameter of the model");
    TFM_CHECK(t.shape() == p->second.shape() && t.dtype() == DType::f32, "optimizer", "state '", key,
              "' is ", t.str(), " but the parameter is ", p->second.str());
    const bool adam = cfg_.kind == OptimizerKind::adamw;
    if (adam && kind == "exp_avg") m_[name] = t.clone();
    else if (adam && kind == "exp_avg_sq") v_[name] = t.clone();
    else if (!adam && kind == "momentum") m_[name] = t.clone();
    else fail("optimizer", "state '", key, "' does not belong to a ", adam ? "adamw" : "sgd", " optimizer");
  }
  TFM_CHECK(m_.size() == v_.size() || cfg_.kind == OptimizerKind::sgd, "optimizer",
            "state has ", m_.size(), " exp_avg but ", v_.size(), " exp_avg_sq tensors");
  TFM_CHECK(steps >= 0, "optimizer", "negative step count ", steps);
  step_ = steps;
}

double clip_grad_norm(std::map<std::string, Tensor>& params, double max_norm, const SplitParameters* sharded) {
  double sq = 0.0, split_sq = 0.0;
  std::map<std::string, double> by_name;  // for sharded->combine
  const bool combine = sharded != nullptr && sharded->combine;
  for (auto& [name, p] : params) {
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    const float* gd = f32_data(g, name, "gradient");
    // Fixed blocks summed in double with four interleaved accumulators (a fixed order, so
    // the norm does not depend on the thread count), blocks added in order.
    double& into = combine ? by_name[name] : sharded != nullptr && sharded->split(name) ? split_sq : sq;
    into += kernels::reduce_blocks(g.numel(), kGrain, [gd](std::int64_t b, std::int64_t e) {
      double acc[4] = {0.0, 0.0, 0.0, 0.0};
      std::int64_t i = b;
      for (; i + 4 <= e; i += 4)
        for (int k = 0; k < 4; ++k) acc[k] += static_cast<double>(gd[i + k]) * gd[i + k];
      for (; i < e; ++i) acc[0] += static_cast<double>(gd[i]) * gd[i];
      return (acc[0] + acc[1]) + (acc[2] + acc[3]);
    });
  }
  if (combine) sq = sharded->combine(by_name);
  else if (sharded != nullptr) sq += sharded->sum_split(split_sq);
  const double norm = std::sqrt(sq);
  if (max_norm > 0 && std::isfinite(norm)) {
    const double coef = max_norm / (norm + 1e-6);
    if (coef < 1.0) scale_grads(params, static_cast<float>(coef));
  }
  return norm;
}

void scale_grads(std::map<std::string, Tensor>& params, float s) {
  for (auto& [name, p] : params) {
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    float* gd = f32_data(g, name, "gradient");
    kernels::parallel_for(g.numel(), kGrain, [&](std::int64_t b, std::int64_t e) {
      for (std::int64_t i = b; i < e; ++i) gd[i] *= s;
    });
  }
}

double add_gradient_noise(std::map<std::string, Tensor>& params, double eta, double gamma, std::int64_t step,
                          std::uint64_t seed) {
  TFM_CHECK(eta >= 0 && gamma >= 0 && step >= 0, "train", "gradient noise needs eta >= 0, gamma >= 0 and step >= 0, got ",
            eta, ", ", gamma, ", ", step);
  const double sigma = std::sqrt(eta / std::pow(1.0 + static_cast<double>(step), gamma));
  if (sigma == 0.0) return 0.0;
  // One Philox stream per step; elements numbered through the parameters in name order, so
  // the noise is the same whatever the thread count and which gradients exist.
  const std::uint64_t stream = seed * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(step) * 0xBF58476D1CE4E5B9ull + 0x6E6F697365ull;
  std::uint64_t offset = 0;
  std::vector<float> noise;
  for (auto& [name, p] : params) {
    const Tensor g = p.grad();
    const auto n = static_cast<std::uint64_t>(p.numel());
    if (g.defined()) {
      float* gd = f32_data(g, name, "gradient");
      noise.resize(static_cast<std::size_t>(n));
      kernels::fill_normal(noise.data(), p.numel(), stream, offset, 0.0f, static_cast<float>(sigma));
      for (std::int64_t i = 0; i < p.numel(); ++i) gd[i] += noise[static_cast<std::size_t>(i)];
    }
    offset += n;
  }
  return sigma;
}

}  // namespace tfm
