// Fuzz target: a SentencePiece .model (serialized protobuf) on arbitrary bytes, through the
// engine's loader, then a few encodes and a decode. Bad input must be a tfm::Error; a model
// it accepts must encode text to ids inside its vocabulary.
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "tfm/error.h"
#include "tokenize/spm_model.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    const tfm::tok::SpmModel m(bytes, "fuzz.model");
    for (const char* text : {"Hello world, how are you?", "  caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x98\x80", ""}) {
      std::vector<std::int32_t> ids;
      m.encode(text, ids);
      for (const std::int32_t id : ids) tfm::fuzz::require(id >= 0 && id < m.size(), "ids lie inside the vocabulary");
      (void)m.decode(ids);
    }
  } catch (const tfm::Error&) {
  }
  return 0;
}
