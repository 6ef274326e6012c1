// repack_for_decode (tfm/quantize.h): q4_0 weight matrices into the 16-row interleaved layout
// of the AVX2 / AVX-512 VNNI decode kernel (kernels/quant_repack.h), in place.
#include <map>
#include <string>

#include "kernels/quant_repack.h"
#include "tfm/quantize.h"

namespace tfm {

std::size_t repack_for_decode(Model& model) {
  if (!kernels::q4_0x16_kernel_available()) return 0;
  std::map<std::string, DType> types;
  for (const auto& w : model.weight_matrices())
    // A token table that is also the LM head is read whole every step (the gather reads a
    // q4_0x16 row from its lane: ops/embedding.cpp); a table that is only gathered gains nothing.
    if ((w.role != WeightMatrix::Role::embedding || w.tied_output) && model.parameters().at(w.name).dtype() == DType::q4_0)
      types[w.name] = DType::q4_0x16;
  if (!types.empty()) model.convert_weights(types);
  return types.size();
}

}  // namespace tfm
