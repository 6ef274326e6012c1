// Per-tensor weight types: target type, llama.cpp's Q4_K_M recipe, block-size fallbacks.
#include "tfm/quantize.h"

#include "tfm/error.h"

namespace tfm {
namespace {

bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// llama.cpp's use_more_bits(i, n): the first and last eighth of the layers, and every third
// layer in between, get the more precise type.
bool more_bits(std::int64_t i, std::int64_t n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

// Attention V (also GPT-2's fused c_attn, which holds V) and FFN down projections.
bool is_v_or_down(const std::string& name) {
  for (const char* t : {"v_proj.weight", "c_attn.weight", "attention.self.value.weight", "ffn.down_proj.weight",
                        "mlp.down_proj.weight", "mlp.c_proj.weight", "output.dense.weight", "DenseReluDense.wo.weight",
                        "SelfAttention.v.weight", "EncDecAttention.v.weight", "fc2.weight", "linear2.weight"})
    if (ends_with(name, t)) return true;
  return false;
}

bool fits(DType t, std::int64_t cols) { return cols % dtype_block_elems(t) == 0; }

}  // namespace

DType parse_weight_type(const std::string& name, const char* flag) {
  for (DType t : {DType::f32, DType::bf16, DType::f16, DType::q8_0, DType::q4_0, DType::q4_k, DType::q6_k})
    if (name == dtype_name(t)) return t;
  fail(flag, "unsupported weight type '", name, "' (allowed: f32, bf16, f16, q8_0, q4_0, q4_k, q6_k)");
}

std::map<std::string, DType> plan_weight_types(const Model& model, const QuantizeOptions& opt,
                                               std::vector<std::string>* notes) {
  TFM_CHECK(opt.recipe.empty() || opt.recipe == "q4_k_m", "quantize", "unknown recipe '", opt.recipe,
            "' (allowed: q4_k_m)");
  std::map<std::string, DType> plan;
  for (const auto& w : model.weight_matrices()) {
    DType t = opt.type;
    if (opt.recipe == "q4_k_m") {
      const bool output = w.role == WeightMatrix::Role::output || w.tied_output;
      if (output || (w.layer >= 0 && is_v_or_down(w.name) && more_bits(w.layer, w.n_layers))) t = DType::q6_k;
    }
    if (dtype_is_block(t) && !fits(t, w.cols)) {
      const std::string what = "tensor '" + w.name + "' (" + std::to_string(w.rows) + ", " + std::to_string(w.cols) + ")";
      TFM_CHECK(opt.fallback, "quantize", what, " cannot be ", dtype_name(t), ": rows of ", w.cols,
                " are not a multiple of its block of ", dtype_block_elems(t));
      const DType from = t;
      t = fits(DType::q8_0, w.cols) ? DType::q8_0 : DType::f16;
      if (notes)
        notes->push_back(what + ": " + dtype_name(from) + " -> " + dtype_name(t) + " (rows of " + std::to_string(w.cols) +
                         " do not fit its block of " + std::to_string(dtype_block_elems(from)) + ")");
    }
    plan[w.name] = t;
  }
  return plan;
}

std::vector<std::string> quantize_model(Model& model, const QuantizeOptions& opt) {
  std::vector<std::string> notes;
  model.convert_weights(plan_weight_types(model, opt, &notes));
  return notes;
}

void dequantize_model(Model& model) {
  std::map<std::string, DType> all;
  for (const auto& w : model.weight_matrices()) all[w.name] = DType::f32;
  model.convert_weights(all);
}

}  // namespace tfm
