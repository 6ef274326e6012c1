// Machine probes for `tfm bench`: the FMA peak and the read bandwidth this machine gives,
// as yardsticks for the GEMM figures printed beside them.
#pragma once

#include <cstdint>

namespace tfm::cli {

// Widest FMA the CPU has ("avx512", "avx2" or "scalar").
const char* fma_isa_name();
// GFLOP/s of a long run of independent FMAs on `threads` threads together (each thread runs
// the same loop; the total is reported). Best of `reps`.
double peak_gflops(int threads, int reps);
// GB/s of summing a `bytes`-sized float array (larger than the caches) on `threads` threads,
// each reading its share as 1, 2, 4 or 8 side-by-side streams (the best is reported).
double read_bandwidth_gbs(std::int64_t bytes, int threads, int reps);

}  // namespace tfm::cli
