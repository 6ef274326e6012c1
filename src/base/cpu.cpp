// CPU feature detection (cpuid/xgetbv) and the run-time choice of kernel instruction set.
#include <cpuid.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "tfm/error.h"
#include "tfm/runtime.h"

namespace tfm {
namespace {

std::uint64_t xgetbv0() {
  std::uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<std::uint64_t>(hi) << 32) | lo;
}

CpuInfo detect() {
  CpuInfo c;
  c.logical_cores = static_cast<int>(std::thread::hardware_concurrency());
  unsigned a = 0, b = 0, cx = 0, d = 0;
  if (__get_cpuid(0x80000000, &a, &b, &cx, &d) && a >= 0x80000004) {
    char brand[49] = {};
    for (unsigned i = 0; i < 3; ++i) {
      __get_cpuid(0x80000002 + i, &a, &b, &cx, &d);
      std::memcpy(brand + 16 * i + 0, &a, 4);
      std::memcpy(brand + 16 * i + 4, &b, 4);
      std::memcpy(brand + 16 * i + 8, &cx, 4);
      std::memcpy(brand + 16 * i + 12, &d, 4);
    }
    c.brand = brand;
    while (!c.brand.empty() && c.brand.back() == ' ') c.brand.pop_back();
  }
  if (!__get_cpuid(1, &a, &b, &cx, &d)) return c;
  const bool osxsave = cx & bit_OSXSAVE;
  const bool fma = cx & bit_FMA, f16c = cx & bit_F16C;
  const std::uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  const bool ymm_ok = (xcr0 & 0x6) == 0x6;     // SSE + AVX state saved by the OS
  const bool zmm_ok = (xcr0 & 0xE6) == 0xE6;   // + opmask and ZMM state
  __cpuid_count(7, 0, a, b, cx, d);
  c.fma = fma && ymm_ok;
  c.f16c = f16c && ymm_ok;
  c.avx2 = (b & bit_AVX2) && ymm_ok;
  c.avx512f = (b & bit_AVX512F) && zmm_ok;
  c.avx512bw = (b & bit_AVX512BW) && zmm_ok;
  c.avx512vl = (b & bit_AVX512VL) && zmm_ok;
  c.avx512dq = (b & bit_AVX512DQ) && zmm_ok;
  c.avx512_vnni = (cx & bit_AVX512VNNI) && zmm_ok;
  __cpuid_count(7, 1, a, b, cx, d);
  c.avx512_bf16 = (a & bit_AVX512BF16) && zmm_ok;
  return c;
}

std::atomic<int> g_isa{-1};

Isa env_or_best() {
  Isa best = cpu_best_isa();
  const char* env = std::getenv("TFM_ISA");
  if (env == nullptr || *env == '\0') return best;
  Isa want = isa_from_name(env);
  TFM_CHECK(static_cast<int>(want) <= static_cast<int>(best), "TFM_ISA",
            "this CPU supports up to ", isa_name(best), ", cannot use ", env);
  return want;
}

}  // namespace

const CpuInfo& cpu_info() {
  static const CpuInfo info = detect();
  return info;
}

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::generic: return "generic";
    case Isa::avx2: return "avx2";
    case Isa::avx512: return "avx512";
  }
  return "?";
}

Isa isa_from_name(const std::string& name) {
  if (name == "generic") return Isa::generic;
  if (name == "avx2") return Isa::avx2;
  if (name == "avx512") return Isa::avx512;
  fail("TFM_ISA", "unknown instruction set '", name, "' (allowed: generic, avx2, avx512)");
}

Isa cpu_best_isa() {
  const CpuInfo& c = cpu_info();
  if (c.avx512f && c.avx512bw && c.avx512vl && c.avx512dq && c.fma && c.f16c) return Isa::avx512;
  if (c.avx2 && c.fma && c.f16c) return Isa::avx2;
  return Isa::generic;
}

Isa active_isa() {
  int v = g_isa.load();
  if (v < 0) {
    v = static_cast<int>(env_or_best());
    g_isa = v;
  }
  return static_cast<Isa>(v);
}

void set_active_isa(Isa isa) {
  TFM_CHECK(static_cast<int>(isa) <= static_cast<int>(cpu_best_isa()), "isa",
            "this CPU supports up to ", isa_name(cpu_best_isa()), ", cannot use ", isa_name(isa));
  g_isa = static_cast<int>(isa);
}

}  // namespace tfm
