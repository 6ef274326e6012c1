// setup_process (runtime.h): the process-wide settings an engine program starts with.
#include <csignal>
#include <cstdlib>

#include <malloc.h>
#include <unistd.h>

#include "tfm/runtime.h"

namespace tfm {

void setup_process(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") == nullptr && std::getenv("GOMP_SPINCOUNT") == nullptr) {
    setenv("OMP_WAIT_POLICY", "passive", 0);
    setenv("TFM_OMP_DEFAULTED", "1", 1);
    if (argv != nullptr) execv("/proc/self/exe", argv);  // returns only if that failed: go on with the default
  }
  std::signal(SIGXFSZ, SIG_IGN);
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
}

}  // namespace tfm
