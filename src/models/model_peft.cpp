// Bottleneck adapters and prefix tuning on a Model (peft.h): fresh or loaded tensors beside
// the base weights, and the per-layer prefix keys/values the attention layers read.
#include <cmath>

#include "kernels/random.h"
#include "models/model_impl.h"
#include "tfm/autograd.h"
#include "tfm/error.h"
#include "tfm/ops.h"

namespace tfm {
namespace {

constexpr const char* kPrefixTable = "prompt_encoder.embedding.weight";  // PEFT's PrefixEncoder names
constexpr const char* kProj0 = "prompt_encoder.transform.0";
constexpr const char* kProj2 = "prompt_encoder.transform.2";

bool is_bottleneck_name(const std::string& n) {
  return n.find("attention_adapter.adapter_") != std::string::npos ||
         n.find("output_adapter.adapter_") != std::string::npos;
}
bool is_prefix_name(const std::string& n) { return n.rfind("prompt_encoder.", 0) == 0; }

std::int64_t self_attention_layers(const Layout& l) {
  return static_cast<std::int64_t>(l.encoder.layers.size() + l.decoder.layers.size());
}

void check_no_adapter(const Model::Impl& m, const char* what) {
  TFM_CHECK(!m.lora && !m.bottleneck && !m.prefix, what, "the model already has an adapter (",
            m.lora ? "LoRA" : m.bottleneck ? "bottleneck" : "prefix tuning", "); one adapter at a time");
}

Tensor as_param(const Tensor& t) {
  Tensor f = t.dtype() == DType::f32 && t.is_contiguous() ? t : cast(contiguous(t), DType::f32);
  if (f.autograd_meta() == nullptr) f.requires_grad_(false);
  return f;
}

// Kaiming-uniform (a = sqrt(5)) as torch.nn.Linear: weight and bias U(-1/sqrt(in), 1/sqrt(in)).
Tensor uniform(const Shape& shape, std::int64_t fan_in, std::uint64_t seed, std::uint64_t& offset) {
  Tensor t = Tensor::empty(shape);
  const float bound = 1.0f / std::sqrt(static_cast<float>(fan_in));
  kernels::fill_uniform(t.data<float>(), t.numel(), seed, offset, -bound, bound);
  offset += static_cast<std::uint64_t>(t.numel());
  return t;
}

}  // namespace

std::int64_t BottleneckConfig::size(std::int64_t d_model) const {
  if (bottleneck_size > 0) return bottleneck_size;
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(static_cast<double>(d_model) / reduction_factor));
}

// ---- bottleneck adapters ------------------------------------------------------------------

void Model::add_bottleneck(const BottleneckConfig& cfg, std::uint64_t seed) {
  impl_->check_converted("add_bottleneck");
  TFM_CHECK(cfg.bottleneck_size > 0 || cfg.reduction_factor > 0, "adapter", "reduction_factor must be > 0");
  const std::int64_t C = impl_->cfg.d_model, m = cfg.size(C);
  std::map<std::string, Tensor> t;
  std::uint64_t offset = 0;
  for (const Stack* s : {&impl_->layout.encoder, &impl_->layout.decoder}) {
    for (const Layer& L : s->layers) {
      for (const char* where : {"attention_adapter", "output_adapter"}) {
        if (cfg.placement == BottleneckPlacement::pfeiffer && where[0] == 'a') continue;
        const std::string p = L.name + where;
        // Down: Kaiming-uniform like a fresh torch Linear; up and its bias zero, so a(h) = h.
        t[p + ".adapter_down.weight"] = uniform({m, C}, C, seed, offset);
        t[p + ".adapter_down.bias"] = uniform({m}, C, seed, offset);
        t[p + ".adapter_up.weight"] = Tensor::zeros({C, m});
        t[p + ".adapter_up.bias"] = Tensor::zeros({C});
      }
    }
  }
  attach_bottleneck(cfg, t);
}

void Model::attach_bottleneck(const BottleneckConfig& cfg, const std::map<std::string, Tensor>& tensors) {
  impl_->check_converted("attach_bottleneck");
  check_no_adapter(*impl_, "adapter");
  const std::int64_t C = impl_->cfg.d_model, m = cfg.size(C);
  std::map<std::string, Tensor> want;  // every name the placement needs, with its shape
  for (const Stack* s : {&impl_->layout.encoder, &impl_->layout.decoder})
    for (const Layer& L : s->layers)
      for (const char* where : {"attention_adapter", "output_adapter"}) {
        if (cfg.placement == BottleneckPlacement::pfeiffer && where[0] == 'a') continue;
        const std::string p = L.name + where;
        want[p + ".adapter_down.weight"] = Tensor::empty({m, C});
        want[p + ".adapter_down.bias"] = Tensor::empty({m});
        want[p + ".adapter_up.weight"] = Tensor::empty({C, m});
        want[p + ".adapter_up.bias"] = Tensor::empty({C});
      }
  for (const auto& [name, t] : tensors)
    TFM_CHECK(want.count(name) == 1, "adapter", "tensor '", name, "' is not a ", to_string(cfg.placement),
              " bottleneck adapter tensor of this model (e.g. '", want.begin()->first, "')");
  std::map<std::string, Tensor> checked;
  for (const auto& [name, shape_of] : want) {
    auto it = tensors.find(name);
    TFM_CHECK(it != tensors.end(), "adapter", "missing tensor '", name, "' ", shape_str(shape_of.shape()));
    TFM_CHECK(it->second.shape() == shape_of.shape(), "adapter", "tensor '", name, "' has shape ",
              shape_str(it->second.shape()), ", d_model ", C, " and bottleneck size ", m, " need ",
              shape_str(shape_of.shape()));
    checked[name] = as_param(it->second);
  }
  for (auto& [name, t] : checked) impl_->params[name] = t;
  impl_->bottleneck = cfg;
  impl_->rewire();
}

bool Model::has_bottleneck() const { return impl_->bottleneck.has_value(); }
const BottleneckConfig& Model::bottleneck_config() const {
  TFM_CHECK(impl_->bottleneck.has_value(), "adapter", "the model has no bottleneck adapters");
  return *impl_->bottleneck;
}

// ---- prefix tuning --------------------------------------------------------------------------

std::int64_t Model::prefix_width() const {
  const ModelConfig& c = impl_->cfg;
  return self_attention_layers(impl_->layout) * 2 * c.kv_heads() * c.dim_head();
}

void Model::add_prefix(const PrefixConfig& cfg, std::uint64_t seed) {
  impl_->check_converted("add_prefix");
  TFM_CHECK(cfg.num_virtual_tokens >= 1, "prefix", "num_virtual_tokens must be >= 1, got ", cfg.num_virtual_tokens);
  const std::int64_t P = cfg.num_virtual_tokens, C = impl_->cfg.d_model, W = prefix_width();
  std::map<std::string, Tensor> t;
  std::uint64_t offset = 0;
  // torch.nn.Embedding's N(0, 1), as PEFT's PrefixEncoder starts.
  Tensor table = Tensor::empty({P, cfg.prefix_projection ? C : W});
  kernels::fill_normal(table.data<float>(), table.numel(), seed, offset, 0.0f, 1.0f);
  offset += static_cast<std::uint64_t>(table.numel());
  t[kPrefixTable] = table;
  if (cfg.prefix_projection) {
    const std::int64_t h = cfg.encoder_hidden_size > 0 ? cfg.encoder_hidden_size : C;
    t[std::string(kProj0) + ".weight"] = uniform({h, C}, C, seed, offset);
    t[std::string(kProj0) + ".bias"] = uniform({h}, C, seed, offset);
    t[std::string(kProj2) + ".weight"] = uniform({W, h}, h, seed, offset);
    t[std::string(kProj2) + ".bias"] = uniform({W}, h, seed, offset);
  }
  attach_prefix(cfg, t);
}

void Model::attach_prefix(const PrefixConfig& cfg, const std::map<std::string, Tensor>& tensors) {
  impl_->check_converted("attach_prefix");
  check_no_adapter(*impl_, "prefix");
  TFM_CHECK(cfg.num_virtual_tokens >= 1, "prefix", "num_virtual_tokens must be >= 1, got ", cfg.num_virtual_tokens);
  TFM_CHECK(impl_->cfg.sliding_window == 0, "prefix", "prefix tuning with a sliding_window is not supported (the "
            "window would hide the prefix from later queries)");
  const std::int64_t P = cfg.num_virtual_tokens, C = impl_->cfg.d_model, W = prefix_width();
  const std::int64_t h = cfg.encoder_hidden_size > 0 ? cfg.encoder_hidden_size : C;
  std::map<std::string, Shape> want{{kPrefixTable, {P, cfg.prefix_projection ? C : W}}};
  if (cfg.prefix_projection) {
    want[std::string(kProj0) + ".weight"] = {h, C};
    want[std::string(kProj0) + ".bias"] = {h};
    want[std::string(kProj2) + ".weight"] = {W, h};
    want[std::string(kProj2) + ".bias"] = {W};
  }
  for (const auto& [name, t] : tensors)
    TFM_CHECK(want.count(name) == 1, "prefix", "tensor '", name, "' is not part of this prefix encoder");
  std::map<std::string, Tensor> checked;
  for (const auto& [name, shape] : want) {
    auto it = tensors.find(name);
    TFM_CHECK(it != tensors.end(), "prefix", "missing tensor '", name, "' ", shape_str(shape));
    TFM_CHECK(it->second.shape() == shape, "prefix", "tensor '", name, "' has shape ", shape_str(it->second.shape()),
              "; ", P, " virtual tokens over ", self_attention_layers(impl_->layout), " layers x 2 x ",
              impl_->cfg.kv_heads() * impl_->cfg.dim_head(), " need ", shape_str(shape));
    checked[name] = as_param(it->second);
  }
  for (auto& [name, t] : checked) impl_->params[name] = t;
  impl_->prefix = cfg;
}

bool Model::has_prefix() const { return impl_->prefix.has_value(); }
const PrefixConfig& Model::prefix_config() const {
  TFM_CHECK(impl_->prefix.has_value(), "prefix", "the model has no prefix");
  return *impl_->prefix;
}
std::int64_t Model::prefix_length() const { return impl_->prefix ? impl_->prefix->num_virtual_tokens : 0; }

// (P, L*2*kv_dim): the table itself, or the reparameterisation MLP applied to it.
static Tensor prefix_rows(const Model::Impl& m) {
  const Tensor& e = m.params.at(kPrefixTable);
  if (!m.prefix->prefix_projection) return e;
  const auto& p = m.params;
  const Tensor hidden = tanh(linear(e, p.at(std::string(kProj0) + ".weight"), p.at(std::string(kProj0) + ".bias")));
  return linear(hidden, p.at(std::string(kProj2) + ".weight"), p.at(std::string(kProj2) + ".bias"));
}

Tensor Model::prefix_table() const {
  NoGradGuard no_grad;
  return contiguous(prefix_rows(*impl_));
}

std::vector<std::pair<Tensor, Tensor>> Model::Impl::prefix_kv() const {
  std::vector<std::pair<Tensor, Tensor>> out;
  if (!prefix) return out;
  const std::int64_t P = prefix->num_virtual_tokens, Hkv = cfg.kv_heads(), Dh = cfg.dim_head(), kv = Hkv * Dh;
  const Tensor rows = prefix_rows(*this);
  const std::int64_t L = rows.size(1) / (2 * kv);
  // PEFT's layout: row p = [layer 0 keys | layer 0 values | layer 1 keys | ...], heads major.
  const auto block = [&](std::int64_t i) {
    return permute(reshape(slice(rows, 1, i * kv, (i + 1) * kv), {1, P, Hkv, Dh}), {0, 2, 1, 3});  // (1, Hkv, P, Dh)
  };
  for (std::int64_t l = 0; l < L; ++l) out.emplace_back(block(2 * l), block(2 * l + 1));
  return out;
}

// ---- all adapters ---------------------------------------------------------------------------

std::map<std::string, Tensor> Model::adapter_parameters() const {
  std::map<std::string, Tensor> out;
  for (const auto& [name, t] : impl_->params)
    if (name.find(".lora_A.") != std::string::npos || name.find(".lora_B.") != std::string::npos ||
        is_bottleneck_name(name) || is_prefix_name(name))
      out[name] = t;
  return out;
}

}  // namespace tfm
