// The run-time instruction-set choice: what the CPU reports, and the check that a run on an
// emulated CPU (tests/isa/run_on_avx2_cpu.sh) really saw the CPU it emulates.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "tfm/runtime.h"

using namespace tfm;

TEST(Runtime, BestIsaIsTheOneTheRunExpects) {
  const char* want = std::getenv("TFM_EXPECT_BEST_ISA");
  const Isa best = cpu_best_isa();
  if (want != nullptr && *want != '\0') {
    ASSERT_STREQ(isa_name(best), want) << "cpu: " << cpu_info().brand;
    if (std::string(want) == "avx2") {
      EXPECT_FALSE(cpu_info().avx512f);
      EXPECT_TRUE(cpu_info().avx2 && cpu_info().fma && cpu_info().f16c);
    }
  }
  // The active ISA never exceeds what the CPU has.
  EXPECT_LE(static_cast<int>(active_isa()), static_cast<int>(best));
}
