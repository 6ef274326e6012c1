// Weight types at load and in `tfm quantize` (docs/quantization.md): which type each weight
// matrix gets for a target type and recipe, and converting a model accordingly.
//
//   QuantizeOptions q;  q.type = DType::q4_k;  q.recipe = "q4_k_m";
//   for (const auto& line : quantize_model(model, q)) std::fprintf(stderr, "%s\n", line.c_str());
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tfm/dtype.h"
#include "tfm/model.h"

namespace tfm {

struct QuantizeOptions {
  DType type = DType::f32;  // f32, bf16, f16, q8_0, q4_0, q4_k, q6_k
  // "" : every weight matrix in `type`.
  // "q4_k_m": llama.cpp's Q4_K_M rule: the output head (the tied embedding included) and
  //   the attention V and FFN down projections of the first and last eighth of the layers
  //   and every third layer between them in q6_k, the rest in `type`.
  std::string recipe;
  // A matrix whose rows do not fit the block (q4_k/q6_k: 256, q8_0/q4_0: 32) falls back to
  // the nearest type that fits and is at least as precise (q4_k, q6_k -> q8_0 -> f16), as
  // llama.cpp does; false makes it an error naming the tensor and its shape.
  bool fallback = true;
};

// The parsed type of --dtype / --type ("f32", "q4_k", ...; one-line error otherwise).
DType parse_weight_type(const std::string& name, const char* flag);
// Type per weight matrix (names as in Model::weight_matrices). `notes` gets one line per
// fallback ("tensor 'x' (128, 100): q4_k -> q8_0 (rows of 100 ...)").
std::map<std::string, DType> plan_weight_types(const Model& model, const QuantizeOptions& opt,
                                               std::vector<std::string>* notes = nullptr);
// Converts the model's weight matrices as planned; returns the fallback notes.
std::vector<std::string> quantize_model(Model& model, const QuantizeOptions& opt);
// Every weight matrix back to f32 (what training and LoRA merges need).
void dequantize_model(Model& model);
// Inference only: q4_0 and q8_0 weight matrices (and a token table tied to the LM head)
// repacked in place into q4_0x16 / q8_0x16 for the decode kernels, where this CPU and TFM_ISA
// run them (kernels/quant_repack.h: q4_0 on AVX2 and AVX-512 VNNI, q8_0 on AVX2). Returns how
// many were repacked. The model can no longer be saved or converted from them (they have no
// file type); reload the file for that.
std::size_t repack_for_decode(Model& model);

}  // namespace tfm
