// The process-wide matrix-product precision (tfm/runtime.h).
#include <atomic>

#include "tfm/error.h"
#include "tfm/runtime.h"

namespace tfm {
namespace {
std::atomic<int> g_precision{static_cast<int>(Precision::fp32)};
}

const char* precision_name(Precision p) { return p == Precision::bf16 ? "bf16" : "fp32"; }

Precision precision_from_name(const std::string& name) {
  if (name == "fp32") return Precision::fp32;
  if (name == "bf16") return Precision::bf16;
  fail("precision", "unknown precision '", name, "' (allowed: fp32, bf16)");
}

void set_matmul_precision(Precision p) { g_precision.store(static_cast<int>(p), std::memory_order_relaxed); }
Precision matmul_precision() { return static_cast<Precision>(g_precision.load(std::memory_order_relaxed)); }

}  // namespace tfm
