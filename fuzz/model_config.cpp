// Fuzz target: config.json (parse_model_config) on arbitrary text. Bad input must be a
// tfm::Error naming the problem; a config it accepts must write out (model_config_to_json)
// to text that parses back to the same config.
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "tfm/error.h"
#include "tfm/model_config.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  tfm::ModelConfig cfg;
  try {
    cfg = tfm::parse_model_config(text, "fuzz");
  } catch (const tfm::Error&) {
    return 0;
  }
  const std::string written = tfm::model_config_to_json(cfg);
  const tfm::ModelConfig back = tfm::parse_model_config(written, "fuzz round trip");  // must not throw
  tfm::fuzz::require(tfm::model_config_to_json(back) == written, "config.json round-trips");
  return 0;
}
