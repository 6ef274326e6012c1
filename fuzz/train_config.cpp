// Fuzz target: the training config (parse_train_config) on arbitrary text. Bad input must be
// a tfm::Error naming the key and the rule; a config it accepts must hold values inside the
// ranges the parser checks (a sample of them).
#include <cstdint>
#include <string>

#include "fuzz_check.h"
#include "tfm/error.h"
#include "tfm/train.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  tfm::TrainConfig c;
  try {
    c = tfm::parse_train_config(text, "fuzz");
  } catch (const tfm::Error&) {
    return 0;
  }
  tfm::fuzz::require(c.batch_size >= 1 && c.grad_accum >= 1 && c.max_steps >= 1, "step counts are positive");
  tfm::fuzz::require(c.val_fraction >= 0 && c.val_fraction <= 0.5, "val_fraction is in [0, 0.5]");
  tfm::fuzz::require(c.block_size >= 2 && c.max_length >= 2, "sequence lengths are at least 2");
  tfm::fuzz::require(c.eval_every >= 1 && c.log_every >= 1, "eval/log intervals are positive");
  return 0;
}
