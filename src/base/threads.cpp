// The engine-wide thread count, applied to OpenMP.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <thread>

#include "tfm/error.h"
#include "tfm/runtime.h"

namespace tfm {
namespace {
int default_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}
std::atomic<int> g_threads{0};  // 0 = not yet set: use all cores
}  // namespace

void set_num_threads(int n) {
  TFM_CHECK(n >= 1 && n <= 1024, "threads", "thread count must be in 1..1024, got ", n);
  g_threads = n;
  omp_set_num_threads(n);
}

int num_threads() {
  int n = g_threads.load();
  if (n == 0) {
    n = default_threads();
    g_threads = n;
    omp_set_num_threads(n);
  }
  return n;
}

}  // namespace tfm
