#include "models/wiring.h"

#include <cstring>

#include "tfm/error.h"
#include "tfm/ops.h"

namespace tfm {

std::string layer_prefix(const std::string& prefix, std::int64_t i) { return prefix + "." + std::to_string(i) + "."; }

void add_linear_spec(std::vector<ParamSpec>& s, const std::string& name, std::int64_t out, std::int64_t in, bool bias) {
  s.push_back({name + ".weight", {out, in}});
  if (bias) s.push_back({name + ".bias", {out}});
}

void add_norm_spec(std::vector<ParamSpec>& s, const std::string& name, const ModelConfig& c) {
  if (c.norm == NormKind::scale_norm) {
    s.push_back({name + ".weight", {1}});  // ScaleNorm's single learned scale g
    return;
  }
  s.push_back({name + ".weight", {c.d_model}});
  if (c.norm == NormKind::layer_norm) s.push_back({name + ".bias", {c.d_model}});
}

Tensor WireParams::need(const std::string& name) const {
  auto it = p_.find(name);
  TFM_CHECK(it != p_.end(), "model", "missing parameter '", name, "'");
  return it->second;
}

Tensor WireParams::maybe(const std::string& name) const {
  auto it = p_.find(name);
  return it == p_.end() ? Tensor() : it->second;
}

nn::Linear WireParams::linear(const std::string& name, bool in_out) const {
  nn::Linear l;
  l.weight = need(name + ".weight");
  l.bias = maybe(name + ".bias");
  l.in_out = in_out;
  l.name = name;
  (*linears_)[name] = in_out;
  l.lora_a = maybe(name + ".lora_A.weight");
  if (l.lora_a.defined()) {
    l.lora_b = need(name + ".lora_B.weight");
    l.lora_scale = lora_.scale;
    l.lora_dropout = lora_.dropout;
  }
  return l;
}

nn::Bottleneck WireParams::bottleneck(const std::string& name) const {
  nn::Bottleneck b;
  b.activation = lora_.bottleneck;
  if (p_.count(name + ".adapter_down.weight") == 0) return b;
  b.down.weight = need(name + ".adapter_down.weight");
  b.down.bias = need(name + ".adapter_down.bias");
  b.up.weight = need(name + ".adapter_up.weight");
  b.up.bias = need(name + ".adapter_up.bias");
  return b;
}

nn::Norm WireParams::norm(const std::string& name, const ModelConfig& c) const {
  return nn::Norm{c.norm, need(name + ".weight"), maybe(name + ".bias"), c.norm_eps};
}

nn::Attention attention_shape(const ModelConfig& c) {
  nn::Attention a;
  a.n_heads = c.n_heads;
  a.n_kv_heads = c.kv_heads();
  a.head_dim = c.dim_head();
  return a;
}

nn::Attention wire_attention(const WireParams& P, const ModelConfig& c, const std::string& prefix,
                             const std::array<const char*, 4>& qkvo) {
  nn::Attention a = attention_shape(c);
  a.q_proj = P.linear(prefix + qkvo[0]);
  a.k_proj = P.linear(prefix + qkvo[1]);
  a.v_proj = P.linear(prefix + qkvo[2]);
  a.o_proj = P.linear(prefix + qkvo[3]);
  return a;
}

nn::FeedForward ffn_shape(const ModelConfig& c) {
  nn::FeedForward f;
  f.activation = c.activation;
  return f;
}

Tensor transpose_2d(const Tensor& w) { return contiguous(transpose(w, 0, 1)); }

Tensor conv1d_weight(const Tensor& w) { return w.dtype() == DType::f32 ? transpose_2d(w) : w; }

Tensor concat_rows(const std::vector<Tensor>& parts) {
  if (parts[0].dtype() == DType::f32) return concat(parts, 0);
  std::int64_t rows = 0;
  for (const auto& p : parts) {
    TFM_CHECK(p.dtype() == parts[0].dtype() && p.size(1) == parts[0].size(1), "model", "cannot fuse ", p.str(),
              " with ", parts[0].str(), " (give the fused weights one type)");
    rows += p.size(0);
  }
  Tensor out = Tensor::empty({rows, parts[0].size(1)}, parts[0].dtype());
  auto* o = static_cast<unsigned char*>(out.raw_data());
  for (const auto& p : parts) {
    const Tensor c = p.is_contiguous() ? p : p.clone();
    std::memcpy(o, c.raw_data(), c.nbytes());
    o += c.nbytes();
  }
  return out;
}

bool engine_decoder_lm(const ModelConfig& c) {
  return c.architecture == Architecture::decoder_only &&
         c.head == HeadKind::lm && c.norm_placement == NormPlacement::pre && c.final_norm && !c.embedding_norm &&
         !c.scale_embeddings && c.scale_attention_scores && c.sliding_window == 0 && c.type_vocab_size == 0 &&
         c.dim_head() * c.n_heads == c.d_model;
}

}  // namespace tfm
