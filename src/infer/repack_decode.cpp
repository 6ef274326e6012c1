// repack_for_decode (tfm/quantize.h): q4_0 and q8_0 weight matrices into the 16-row interleaved
// layouts of the decode kernels (kernels/quant_repack.h), in place.
#include <map>
#include <string>

#include "kernels/quant_repack.h"
#include "tfm/quantize.h"

namespace tfm {

std::size_t repack_for_decode(Model& model) {
  std::map<std::string, DType> types;
  for (const auto& w : model.weight_matrices()) {
    const DType t = model.parameters().at(w.name).dtype();
    // A token table that is also the LM head is read whole every step (the gather reads a row
    // from its lane: ops/embedding.cpp); a table that is only gathered gains nothing.
    if ((w.role != WeightMatrix::Role::embedding || w.tied_output) && kernels::x16_type(t) != t &&
        kernels::x16_kernel_available(t))
      types[w.name] = kernels::x16_type(t);
  }
  if (!types.empty()) model.convert_weights(types);
  return types.size();
}

}  // namespace tfm
