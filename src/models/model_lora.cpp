// LoRA on a Model: fresh or loaded factors beside the base weights, and merging them in.
#include <cmath>

#include "kernels/random.h"
#include "models/model_impl.h"
#include "tfm/autograd.h"
#include "tfm/error.h"
#include "tfm/ops.h"

namespace tfm {
namespace {

// '*' matches any run of characters (dots too); everything else literally.
bool glob_match(const std::string& pattern, const std::string& s) {
  std::size_t p = 0, i = 0, star = std::string::npos, mark = 0;
  while (i < s.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = i;
    } else if (p < pattern.size() && pattern[p] == s[i]) {
      ++p, ++i;
    } else if (star != std::string::npos) {
      p = star + 1;
      i = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

const char* kA = ".lora_A.weight";
const char* kB = ".lora_B.weight";

// (in, out) of a linear module's weight.
std::pair<std::int64_t, std::int64_t> in_out_sizes(const Tensor& w, bool in_out) {
  return in_out ? std::make_pair(w.size(0), w.size(1)) : std::make_pair(w.size(1), w.size(0));
}

void check_config(const LoraConfig& c) {
  TFM_CHECK(c.r >= 1, "lora", "r must be >= 1, got ", c.r);
  TFM_CHECK(c.alpha > 0, "lora", "alpha must be > 0, got ", c.alpha);
  TFM_CHECK(c.dropout >= 0 && c.dropout < 1, "lora", "dropout must be in [0, 1), got ", c.dropout);
  TFM_CHECK(!c.target_modules.empty(), "lora", "target_modules is empty");
}

}  // namespace

bool lora_targets(const LoraConfig& cfg, const std::string& name) {
  for (const auto& t : cfg.target_modules) {
    if (t.find('*') != std::string::npos) {
      if (glob_match(t, name)) return true;
    } else if (name == t || (name.size() > t.size() && name.compare(name.size() - t.size(), t.size(), t) == 0 &&
                             name[name.size() - t.size() - 1] == '.')) {
      return true;
    }
  }
  return false;
}

std::vector<std::string> Model::linear_modules() const {
  std::vector<std::string> names;
  for (const auto& [name, in_out] : impl_->layout.linear_modules) names.push_back(name);
  return names;
}

void Model::add_lora(const LoraConfig& cfg, std::uint64_t seed) {
  impl_->check_converted("add_lora");
  check_config(cfg);
  TFM_CHECK(!impl_->lora, "lora", "the model already has LoRA factors (merge_lora first)");
  std::map<std::string, Tensor> factors;
  std::uint64_t offset = 0;
  for (const auto& [name, in_out] : impl_->layout.linear_modules) {
    if (!lora_targets(cfg, name)) continue;
    const auto [in, out] = in_out_sizes(impl_->params.at(name + ".weight"), in_out);
    Tensor a = Tensor::empty({cfg.r, in});
    const float bound = 1.0f / std::sqrt(static_cast<float>(in));  // kaiming_uniform_(a=sqrt(5))
    kernels::fill_uniform(a.data<float>(), a.numel(), seed, offset, -bound, bound);
    offset += static_cast<std::uint64_t>(a.numel());
    factors[name + kA] = a;
    factors[name + kB] = Tensor::zeros({out, cfg.r});
  }
  attach_lora(cfg, factors);
}

void Model::attach_lora(const LoraConfig& cfg, const std::map<std::string, Tensor>& factors) {
  impl_->check_converted("attach_lora");
  check_config(cfg);
  TFM_CHECK(!impl_->lora, "lora", "the model already has LoRA factors (merge_lora first)");
  TFM_CHECK(!impl_->bottleneck && !impl_->prefix, "lora", "the model already has a ",
            impl_->bottleneck ? "bottleneck adapter" : "prefix", "; one adapter at a time");
  const auto& linears = impl_->layout.linear_modules;
  std::map<std::string, Tensor> checked;
  for (const auto& [name, t] : factors) {
    const bool is_a = name.size() > 14 && name.compare(name.size() - 14, 14, kA) == 0;
    const bool is_b = name.size() > 14 && name.compare(name.size() - 14, 14, kB) == 0;
    TFM_CHECK(is_a || is_b, "lora", "tensor '", name, "' is not a LoRA factor (<module>.lora_A.weight / .lora_B.weight)");
    const std::string module = name.substr(0, name.size() - 14);
    auto it = linears.find(module);
    TFM_CHECK(it != linears.end(), "lora", "tensor '", name, "': the model has no linear module '", module, "'");
    const auto [in, out] = in_out_sizes(impl_->params.at(module + ".weight"), it->second);
    const Shape want = is_a ? Shape{cfg.r, in} : Shape{out, cfg.r};
    TFM_CHECK(t.shape() == want, "lora", "tensor '", name, "' has shape ", shape_str(t.shape()), ", the module and r = ",
              cfg.r, " need ", shape_str(want));
    TFM_CHECK(factors.count(module + (is_a ? kB : kA)) == 1, "lora", "tensor '", name, "' has no ",
              is_a ? "lora_B" : "lora_A", " partner");
    Tensor f = t.dtype() == DType::f32 && t.is_contiguous() ? t : cast(contiguous(t), DType::f32);
    if (f.autograd_meta() == nullptr) f.requires_grad_(false);
    checked[name] = f;
  }
  TFM_CHECK(!checked.empty(), "lora", "no linear module matches target_modules; the model's are e.g. '",
            linears.empty() ? std::string("(none)") : linears.begin()->first, "'");
  for (auto& [name, t] : checked) impl_->params[name] = t;
  impl_->lora = cfg;
  impl_->rewire();
}

bool Model::has_lora() const { return impl_->lora.has_value(); }

const LoraConfig& Model::lora_config() const {
  TFM_CHECK(impl_->lora.has_value(), "lora", "the model has no LoRA factors");
  return *impl_->lora;
}

std::map<std::string, Tensor> Model::lora_parameters() const {
  std::map<std::string, Tensor> out;
  for (const auto& [name, t] : impl_->params)
    if (name.find(".lora_A.") != std::string::npos || name.find(".lora_B.") != std::string::npos) out[name] = t;
  return out;
}

void Model::merge_lora() {
  TFM_CHECK(impl_->lora.has_value(), "lora", "the model has no LoRA factors to merge");
  for (const auto& [name, t] : impl_->params)
    TFM_CHECK(t.dtype() == DType::f32, "lora", "cannot merge into '", name, "' held as ", dtype_name(t.dtype()),
              " (merge into the f32 model, then quantize)");
  NoGradGuard no_grad;
  const float scale = static_cast<float>(impl_->lora->scale());
  for (const auto& [module, in_out] : impl_->layout.linear_modules) {
    auto a = impl_->params.find(module + kA);
    if (a == impl_->params.end()) continue;
    const Tensor& b = impl_->params.at(module + kB);
    const Tensor delta = mul_scalar(matmul(b, a->second), scale);  // (out, in)
    Tensor& w = impl_->params.at(module + ".weight");
    const Tensor merged = add(w, in_out ? contiguous(transpose(delta, 0, 1)) : delta);
    w.copy_(merged);  // in place: other handles on the weight (tied copies) see the merge
  }
  for (const auto& [name, t] : lora_parameters()) impl_->params.erase(name);
  impl_->lora.reset();
  impl_->rewire();
}

}  // namespace tfm
