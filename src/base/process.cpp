// setup_process (runtime.h): the process-wide settings an engine program starts with.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string_view>
#include <thread>

#include <dlfcn.h>
#include <malloc.h>
#include <time.h>
#include <unistd.h>

#include "tfm/runtime.h"

namespace tfm {
namespace {

// CPU time the whole machine spent busy over `window`, in cores (from /proc/stat's first line:
// user nice system idle iowait irq softirq steal ...), less this process's own; negative if it
// cannot be read. The main thread sleeps meanwhile, but a library's thread pool started at load
// may not: OpenBLAS (linked through FAISS) spins its workers for a while after creating them,
// which made every start look busy and halved 2-thread decode (GPT-2 q4_k: 130 tok/s instead
// of 321 on the Zen 3).
double busy_cores(std::chrono::milliseconds window) {
  auto self_seconds = [] {
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
  };
  auto sample = [](unsigned long long& busy, unsigned long long& total) {
    FILE* f = std::fopen("/proc/stat", "r");
    if (f == nullptr) return false;
    unsigned long long v[8] = {};
    const int n = std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
                              &v[5], &v[6], &v[7]);
    std::fclose(f);
    if (n < 4) return false;
    busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
    total = busy + v[3] + v[4];
    return true;
  };
  unsigned long long b0, t0, b1, t1;
  const double s0 = self_seconds();
  if (!sample(b0, t0)) return -1;
  std::this_thread::sleep_for(window);
  if (!sample(b1, t1) || t1 <= t0) return -1;
  const double own = self_seconds() - s0;
  const long cores = sysconf(_SC_NPROCESSORS_ONLN), hz = sysconf(_SC_CLK_TCK);
  const double ticks = static_cast<double>(t1 - t0), elapsed = ticks / static_cast<double>(hz > 0 ? hz : 100) /
                                                                   static_cast<double>(cores > 0 ? cores : 1);
  const double all = static_cast<double>(b1 - b0) / ticks * static_cast<double>(cores > 0 ? cores : 1);
  return elapsed > 0 ? std::max(0.0, all - own / elapsed) : all;
}

}  // namespace

void setup_process(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") == nullptr && std::getenv("GOMP_SPINCOUNT") == nullptr) {
    // Idle OpenMP threads: on an idle machine they spin up to 10,000 rounds (libgomp's
    // GOMP_SPINCOUNT; its duration in time was not measured) before
    // sleeping, so the next parallel region of the same decode step finds them awake; where
    // other processes already use at least half a core, they sleep at once (a spinning thread
    // that gets descheduled stalls every small parallel region). Measured on a 2-core Zen 3,
    // GPT-2 q4_0 decode on 2 threads: passive 118 tok/s, spinning 238; with one other busy
    // process, passive 118, spinning 53 (docs/design.md, "Threads").
    const double busy = busy_cores(std::chrono::milliseconds(50));
    const bool idle = busy >= 0 && busy < 0.5;
    // FAISS's BLAS calls run inside our own threads; a second pool of OpenBLAS workers beside
    // OpenMP's only competes for the same cores.
    setenv("OPENBLAS_NUM_THREADS", "1", 0);
    if (idle) setenv("GOMP_SPINCOUNT", "10000", 0);
    else setenv("OMP_WAIT_POLICY", "passive", 0);
    setenv("TFM_OMP_DEFAULTED", idle ? "spin" : "passive", 1);
    if (argv != nullptr) execv("/proc/self/exe", argv);  // returns only if that failed: go on with the default
  }
  // The same where the environment was the user's (no re-exec): OpenBLAS, if loaded, to one thread.
  if (std::getenv("OPENBLAS_NUM_THREADS") == nullptr)
    if (auto set = reinterpret_cast<void (*)(int)>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads")); set != nullptr) set(1);
  std::signal(SIGXFSZ, SIG_IGN);
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
}

const char* omp_waiting_description() {
  const char* chosen = std::getenv("TFM_OMP_DEFAULTED");
  if (chosen != nullptr && std::string_view(chosen) == "spin")
    return "spin up to 10000 rounds, then sleep (tfm's default on a machine idle at start)";
  if (chosen != nullptr) return "sleep at once (tfm's default on a machine busy at start)";
  return "as OMP_WAIT_POLICY / GOMP_SPINCOUNT say (set by the user)";
}

}  // namespace tfm
