// Where the tokenizer parity tests find their references: the environment when set, else the
// paths this build writes them to (compiled in by tests/CMakeLists.txt, so a test discovered by
// ctest needs no per-test environment list).
#pragma once

#include <cstdlib>
#include <string_view>

inline const char* reference_env(const char* name) {
  if (const char* v = std::getenv(name)) return v;
  const std::string_view n = name;
  if (n == "TFM_GPT2_REFERENCE") return TFM_GPT2_REFERENCE_DEFAULT;
  if (n == "TFM_HF_REFERENCE_DIR") return TFM_HF_REFERENCE_DIR_DEFAULT;
  if (n == "TFM_SPM_REFERENCE_DIR") return TFM_SPM_REFERENCE_DIR_DEFAULT;
  if (n == "TFM_SOURCE_DIR") return TFM_SOURCE_DIR_DEFAULT;
  return nullptr;
}
