// Picks a kernel family's build for the active instruction set (tfm::active_isa()).
//
// Each family compiles its template body three times — foo.cpp (baseline x86-64),
// foo_avx2.cpp, foo_avx512.cpp — and exposes one entry point per build; callers ask for the
// pointer once per call (not per element) and run it on their chunk.
#pragma once

#include "tfm/runtime.h"

namespace tfm::kernels {

template <class Fn>
Fn pick_isa(Fn generic, Fn avx2, Fn avx512) {
  switch (active_isa()) {
    case Isa::avx512: return avx512;
    case Isa::avx2: return avx2;
    default: return generic;
  }
}

}  // namespace tfm::kernels
