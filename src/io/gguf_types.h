// Internal tables shared by the GGUF reader and writer: sizes of the metadata scalar types
// and, per GGML tensor type the engine handles, its block size, bytes per block and
// dequantizer.
#pragma once

#include <cstdint>

#include "tfm/gguf.h"

namespace tfm {

struct GgmlTypeTraits {
  const char* name;
  std::uint64_t block;  // elements per block (1 for plain floats)
  std::uint64_t bytes;  // bytes per block
  void (*to_f32)(const void* src, float* out, std::int64_t n);
};

// nullptr for types the engine does not read.
const GgmlTypeTraits* ggml_traits(std::uint32_t type);
// Bytes of a fixed-size metadata scalar (0 for string and array).
std::uint64_t gguf_scalar_size(GgufValueType t);

}  // namespace tfm
