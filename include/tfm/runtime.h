// Process-wide runtime settings: thread count, instruction set, memory accounting, version.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tfm {

// ---- threads -------------------------------------------------------------------------
// One thread count for the whole engine (CLI: -t N). Default: all cores.
// Kernels split work so that every output element is computed by the same code path
// whatever the count, so results are bit-identical across thread counts (docs/design.md
// lists the few documented exceptions).
void set_num_threads(int n);
int num_threads();

// ---- process set-up --------------------------------------------------------------------
// What a program that embeds the engine calls first in main (tfm's own main does), each part
// measured in docs/benchmarks.md:
//   - idle OpenMP threads, unless the user set OMP_WAIT_POLICY or GOMP_SPINCOUNT: on a machine
//     idle at start (other processes used under half a core over 50 ms) they spin a bounded
//     while (GOMP_SPINCOUNT=10000) before sleeping, which halves the cost of the many small
//     parallel regions of a decode step; otherwise they sleep at once (OMP_WAIT_POLICY=passive):
//     on shared cores a descheduled spinning thread stalls every small parallel region.
//     libgomp reads its environment when it is loaded, so this re-executes the program
//     (/proc/self/exe with argv) once; it returns only when that was not needed or failed;
//   - SIGXFSZ ignored: past a file-size limit, writes fail with EFBIG (which the writers
//     report) instead of killing the process in the middle of a checkpoint;
//   - glibc's heap keeps freed tensor memory (mmap threshold 32 MiB, trim threshold 256 MiB)
//     rather than returning and faulting in blocks of a few MiB every training step.
// Sets TFM_OMP_DEFAULTED to "spin" or "passive" when it chose the waiting (child processes may
// tell).
void setup_process(char** argv);
// How idle OpenMP threads wait in this process, in words (tfm info, tfm bench).
const char* omp_waiting_description();

// ---- instruction set -----------------------------------------------------------------
enum class Isa { generic, avx2, avx512 };
const char* isa_name(Isa isa);
Isa isa_from_name(const std::string& name);  // throws on an unknown name

// What the CPU supports (cpuid + OS support for the register state).
Isa cpu_best_isa();
// The instruction set the kernels use: the CPU's best, or TFM_ISA from the environment
// (generic|avx2|avx512) when set. Asking for more than the CPU has is an error.
Isa active_isa();
// Force an instruction set (tests use it to compare ISA builds); throws if unsupported.
void set_active_isa(Isa isa);

struct CpuInfo {
  std::string brand;
  int logical_cores = 0;
  bool avx2 = false, fma = false, f16c = false;
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512_bf16 = false, avx512_vnni = false;
};
const CpuInfo& cpu_info();

// ---- matrix-product precision (mixed-precision training) -------------------------------
// bf16: matmul/linear (forward and both backward products) and attention's operands are
// rounded to bf16 with fp32 accumulation (kernels/gemm_bf16.h); everything else stays fp32.
// Process-wide, like the thread count; the trainer sets it for a run ("precision" in the
// training config) and restores it after. PrecisionScope does the same for a block.
enum class Precision { fp32, bf16 };
const char* precision_name(Precision p);
Precision precision_from_name(const std::string& name);  // "fp32" | "bf16"; throws otherwise
void set_matmul_precision(Precision p);
Precision matmul_precision();
class PrecisionScope {
 public:
  explicit PrecisionScope(Precision p) : saved_(matmul_precision()) { set_matmul_precision(p); }
  ~PrecisionScope() { set_matmul_precision(saved_); }
  PrecisionScope(const PrecisionScope&) = delete;
  PrecisionScope& operator=(const PrecisionScope&) = delete;

 private:
  Precision saved_;
};
// Which bf16 implementation runs on this machine/build: "native vdpbf16ps ...", "oneDNN
// bf16 matmul" or "emulated (...)" (TFM_BF16 overrides; see kernels/gemm_bf16.h).
const char* bf16_path_description();

// ---- memory accounting ---------------------------------------------------------------
// Every tensor allocation goes through the engine's allocator, which counts bytes.
struct MemoryStats {
  std::size_t current_bytes = 0;  // bytes held by live tensors now
  std::size_t peak_bytes = 0;     // high-water mark since start or reset_peak_memory()
  std::size_t allocations = 0;    // number of allocations made
};
MemoryStats memory_stats();
void reset_peak_memory();

// ---- version -------------------------------------------------------------------------
const char* version_string();  // "0.1.0 (git abc1234)"

}  // namespace tfm
