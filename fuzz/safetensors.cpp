// Fuzz target: the safetensors reader on arbitrary bytes. Bad input must be a tfm::Error
// (any other exception, a crash or a sanitizer report is a bug). A file it accepts must hold
// every tensor inside its data section (each byte is read, so ASan sees an overrun) and must
// serialize and parse back to the same names, dtypes, shapes, bytes and metadata.
#include <cstdint>
#include <cstring>
#include <string>

#include "fuzz_check.h"
#include "tfm/error.h"
#include "tfm/safetensors.h"

namespace {

bool same_tensor(const tfm::Tensor& a, const tfm::Tensor& b) {
  if (a.dtype() != b.dtype() || a.shape() != b.shape() || a.nbytes() != b.nbytes()) return false;
  return a.nbytes() == 0 || std::memcmp(a.raw_data(), b.raw_data(), a.nbytes()) == 0;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  tfm::SafetensorsFile f;
  try {
    f = tfm::parse_safetensors(bytes, "fuzz");
  } catch (const tfm::Error&) {
    return 0;
  }
  unsigned sum = 0;
  for (const auto& [name, t] : f.tensors) {
    tfm::fuzz::require(t.is_contiguous(), "a loaded tensor is contiguous");
    const auto* p = static_cast<const unsigned char*>(t.raw_data());
    for (std::size_t i = 0; i < t.nbytes(); ++i) sum += p[i];
  }
  const std::string again = tfm::serialize_safetensors(f.tensors, f.metadata);
  const tfm::SafetensorsFile g = tfm::parse_safetensors(again, "fuzz round trip");  // must not throw
  tfm::fuzz::require(g.metadata == f.metadata, "metadata survives a round trip");
  tfm::fuzz::require(g.tensors.size() == f.tensors.size(), "tensor count survives a round trip");
  for (const auto& [name, t] : f.tensors) {
    const auto it = g.tensors.find(name);
    tfm::fuzz::require(it != g.tensors.end() && same_tensor(t, it->second), "tensors survive a round trip");
  }
  return static_cast<int>(sum & 0);
}
