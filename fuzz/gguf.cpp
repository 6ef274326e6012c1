// Fuzz target: the GGUF reader (v2/v3 header, metadata, tensor infos) on arbitrary bytes, then
// every tensor dequantized. Bad input must be a tfm::Error; a file it accepts must have every
// tensor's bytes inside the file (each is dequantized, so ASan sees an overrun) and values of
// the tensor's element count.
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "tfm/error.h"
#include "tfm/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  tfm::GgufFile f;
  try {
    f = tfm::parse_gguf(std::string(reinterpret_cast<const char*>(data), size), "fuzz");
  } catch (const tfm::Error&) {
    return 0;
  }
  for (const auto& t : f.tensors) {
    try {
      const tfm::Tensor v = f.to_f32(t);
      tfm::fuzz::require(v.numel() == static_cast<std::int64_t>(t.numel()), "a dequantized tensor has numel() values");
    } catch (const tfm::Error&) {
      // a type the reader lists but cannot decode is refused by name, not read past
    }
  }
  // A key of another type is an error naming the key, as the model mapping relies on.
  for (const auto& [key, value] : f.metadata) {
    try {
      (void)f.get_string(key, "");
    } catch (const tfm::Error&) {
    }
  }
  return 0;
}
