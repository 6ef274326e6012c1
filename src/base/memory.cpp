// Aligned allocation with byte accounting (current, peak, count).
#include "base/memory.h"

#include <sys/mman.h>

#include <atomic>
#include <cstdlib>

#include "tfm/error.h"
#include "tfm/runtime.h"

namespace tfm {
namespace {
std::atomic<std::size_t> g_current{0}, g_peak{0}, g_count{0};

std::size_t round_up(std::size_t n) { return (n + base::kAlignment - 1) / base::kAlignment * base::kAlignment; }
}  // namespace

namespace base {

void* allocate(std::size_t bytes) {
  const std::size_t rounded = round_up(bytes == 0 ? 1 : bytes);
  const bool huge = rounded >= kHugePage;
  void* p = std::aligned_alloc(huge ? kHugePage : kAlignment, huge ? (rounded + kHugePage - 1) / kHugePage * kHugePage : rounded);
  if (p == nullptr) fail("alloc", "out of memory allocating ", bytes, " bytes");
  // Weights and large activations are streamed: in 2 MiB pages the walk takes one TLB entry per
  // 2 MiB instead of 512. Where the kernel gives huge pages only on request (THP "madvise"),
  // ask for the whole huge pages inside the block; the rest stays in small pages.
  if (huge) ::madvise(p, rounded / kHugePage * kHugePage, MADV_HUGEPAGE);
  const std::size_t now = g_current.fetch_add(rounded) + rounded;
  std::size_t peak = g_peak.load();
  while (now > peak && !g_peak.compare_exchange_weak(peak, now)) {
  }
  g_count.fetch_add(1);
  return p;
}

void release(void* ptr, std::size_t bytes) {
  if (ptr == nullptr) return;
  std::free(ptr);
  g_current.fetch_sub(round_up(bytes == 0 ? 1 : bytes));
}

}  // namespace base

MemoryStats memory_stats() { return {g_current.load(), g_peak.load(), g_count.load()}; }
void reset_peak_memory() { g_peak = g_current.load(); }

}  // namespace tfm
