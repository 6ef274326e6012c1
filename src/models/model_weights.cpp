// Compact weights: which parameters are weight matrices, and converting them between f32,
// bf16, f16 and the block-quantized types (docs/quantization.md).
#include <algorithm>
#include <cctype>

#include "models/layout.h"
#include "kernels/quant_repack.h"
#include "models/model_impl.h"
#include "tfm/error.h"

namespace tfm {
namespace model_detail {
namespace {

// "decoder.layers.3.ffn.down_proj.weight" -> ("decoder.layers.", 3); -1 when no index.
std::pair<std::string, std::int64_t> layer_of(const std::string& name) {
  std::size_t i = 0;
  while (i < name.size()) {
    const std::size_t dot = name.find('.', i);
    if (dot == std::string::npos) break;
    std::size_t j = dot + 1;
    while (j < name.size() && std::isdigit(static_cast<unsigned char>(name[j]))) ++j;
    if (j > dot + 1 && j < name.size() && name[j] == '.') return {name.substr(0, dot + 1), std::stoll(name.substr(dot + 1, j - dot - 1))};
    i = dot + 1;
  }
  return {"", -1};
}

}  // namespace

std::vector<WeightSlot> weight_matrices_of(const ModelConfig& cfg, const std::map<std::string, Tensor>& params) {
  const Layout l = wire_layout(cfg, params);
  std::vector<WeightSlot> out;
  auto add = [&](const std::string& name, WeightMatrix::Role role, bool in_out) {
    const Tensor& t = params.at(name);
    if (t.dim() != 2) return;
    WeightSlot w;
    w.name = name;
    w.role = role;
    w.in_out = in_out;
    const bool turned = in_out && t.dtype() == DType::f32;  // f32 Conv1D: (in, out)
    w.rows = turned ? t.size(1) : t.size(0);
    w.cols = turned ? t.size(0) : t.size(1);
    w.layer = layer_of(name).second;
    out.push_back(w);
  };
  // The same tensor (tied copies), not merely the same storage: a memory-mapped checkpoint's
  // tensors all view one mapping.
  auto same = [](const Tensor& a, const Tensor& b) {
    return a.defined() && b.defined() && a.storage() == b.storage() && a.offset() == b.offset() && a.shape() == b.shape();
  };
  for (const auto& [name, t] : params) {
    if (same(t, l.tok_emb) && t.dim() == 2) {
      add(name, WeightMatrix::Role::embedding, false);
      out.back().tied_output = cfg.head == HeadKind::lm && same(t, l.lm_head);
    } else if (same(t, l.lm_head) || same(t, l.mlm_decoder)) {
      add(name, WeightMatrix::Role::output, false);
    }
  }
  for (const auto& [module, in_out] : l.linear_modules) add(module + ".weight", WeightMatrix::Role::linear, in_out);
  // Layers per stack (the prefix before the index), for recipes that treat layers by depth.
  std::map<std::string, std::int64_t> depth;
  for (const auto& w : out) {
    const auto [prefix, i] = layer_of(w.name);
    if (i >= 0) depth[prefix] = std::max(depth[prefix], i + 1);
  }
  for (auto& w : out) {
    const auto [prefix, i] = layer_of(w.name);
    if (i >= 0) w.n_layers = depth[prefix];
  }
  return out;
}

}  // namespace model_detail

std::vector<WeightMatrix> Model::weight_matrices() const {
  const auto slots = model_detail::weight_matrices_of(impl_->cfg, impl_->params);
  return {slots.begin(), slots.end()};
}

bool Model::has_compact_weights() const {
  for (const auto& [name, t] : impl_->params)
    if (t.dtype() != DType::f32) return true;
  return false;
}

void Model::convert_weights(const std::map<std::string, DType>& types) {
  impl_->check_converted("convert_weights");
  const auto slots = model_detail::weight_matrices_of(impl_->cfg, impl_->params);
  for (const auto& [name, type] : types) {
    const std::string& wanted = name;  // clang 14 cannot capture a structured binding
    auto slot = std::find_if(slots.begin(), slots.end(), [&](const auto& w) { return w.name == wanted; });
    TFM_CHECK(slot != slots.end(), "quantize", "'", name, "' is not a weight matrix of this model");
    TFM_CHECK(type == DType::f32 || type == DType::bf16 || type == DType::f16 || dtype_is_block(type), "quantize",
              "weights cannot be stored as ", dtype_name(type));
    Tensor& t = impl_->params.at(name);
    if (t.dtype() == type) continue;
    if (kernels::dtype_is_x16(type) && t.dtype() == kernels::x16_plain(type)) {  // in place: no second copy
      kernels::repack_x16(t.dtype(), t.raw_data(), slot->rows, slot->cols);
      t = Tensor::from_storage(t.storage(), t.shape(), type, t.offset());
      t.requires_grad_(false);
      continue;
    }
    TFM_CHECK(!dtype_is_block(type) || slot->cols % dtype_block_elems(type) == 0, "quantize", "tensor '", name,
              "' (", slot->rows, ", ", slot->cols, ") cannot be ", dtype_name(type), ": its rows of ", slot->cols,
              " are not a multiple of the block size ", dtype_block_elems(type));
    // The (out, in) f32 matrix, then the target type. Tied copies share the tensor, so
    // replacing the map's entry and rewiring reaches every user.
    Tensor rows = t.dtype() == DType::f32 ? t : t.clone_as_f32();
    if (slot->in_out && t.dtype() == DType::f32) rows = rows.as_strided({slot->rows, slot->cols}, {1, slot->rows}, rows.offset());
    Tensor out;
    if (type == DType::f32 && slot->in_out) {
      out = rows.as_strided({slot->cols, slot->rows}, {1, slot->cols}, 0).clone();  // back to (in, out)
    } else {
      out = Tensor::empty({slot->rows, slot->cols}, type);
      out.copy_(rows.is_contiguous() ? rows : rows.clone());
    }
    out.requires_grad_(false);
    t = out;
  }
  impl_->rewire();
}

}  // namespace tfm
