// What the fuzz targets share: a property that fails aborts with a message, so libFuzzer
// reports it like a crash and saves the input.
#pragma once

#include <cstdio>
#include <cstdlib>

namespace tfm::fuzz {

inline void require(bool ok, const char* property) {
  if (ok) return;
  std::fprintf(stderr, "fuzz: property failed: %s\n", property);
  std::abort();
}

}  // namespace tfm::fuzz
