// Shared by src/infer/inspect.cpp and attention_maps.cpp (not public API).
#pragma once

#include <string>
#include <vector>

#include "tfm/inspect.h"
#include "tfm/model_dir.h"

namespace tfm::inspect_detail {

struct PaddedIds {
  Tensor ids;   // (B, T) i64, padded with the pad token
  Tensor lens;  // (B) i64
};
PaddedIds pad_batch(const LoadedModel& m, const std::vector<std::vector<std::int32_t>>& seqs);
// input_ids_for of each text; throws naming a text that gives no tokens.
std::vector<std::vector<std::int32_t>> inputs_of(const LoadedModel& m, const std::vector<std::string>& texts);
// Softmax of each row of logits (B, L), each label named by names[id] (or its number).
std::vector<Classification> classifications(const Tensor& logits, const std::vector<std::string>& names);

}  // namespace tfm::inspect_detail
