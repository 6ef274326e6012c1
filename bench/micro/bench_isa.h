// Shared by the kernel benchmarks: apply the (threads, ISA) arguments of a benchmark case.
#pragma once

#include <benchmark/benchmark.h>

#include "tfm/runtime.h"

namespace tfm::bench {

// state.range(0): threads; state.range(1): ISA (0 generic, 1 avx2, 2 avx512). Returns false
// (and skips the case) when the CPU lacks that ISA.
inline bool setup_threads_and_isa(benchmark::State& state) {
  const auto isa = static_cast<tfm::Isa>(state.range(1));
  if (static_cast<int>(isa) > static_cast<int>(tfm::cpu_best_isa())) {
    state.SkipWithError("ISA not supported by this CPU");
    return false;
  }
  tfm::set_active_isa(isa);
  tfm::set_num_threads(static_cast<int>(state.range(0)));
  state.SetLabel(tfm::isa_name(isa));
  return true;
}

}  // namespace tfm::bench
