// FMA peak and read bandwidth probes. The inner loops are compiled for AVX-512 / AVX2 with
// target attributes (the CLI is otherwise built for baseline x86-64) and picked at run time.
#include "bench_probe.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <vector>

#include "tfm/runtime.h"

namespace tfm::cli {
namespace {

volatile float g_sink;  // keeps results observable

// Horizontal sum by a store (GCC 12's _mm512_reduce_add_ps warns under a target attribute).
__attribute__((target("avx512f"))) float hsum512(__m512 v) {
  alignas(64) float t[16];
  _mm512_store_ps(t, v);
  float s = 0;
  for (float x : t) s += x;
  return s;
}

constexpr std::int64_t kPeakIters = 20'000'000;  // x 16 FMAs per iteration per thread

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// 16 independent accumulator chains: enough to cover FMA latency (4 cycles) x 2 FMA ports.
// Returns a value derived from the accumulators so the loop cannot be removed.
__attribute__((target("avx512f"))) float fma_loop_avx512(std::int64_t iters) {
  __m512 acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = _mm512_set1_ps(0.001f * static_cast<float>(i));
  const __m512 m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-7f);
  for (std::int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 16; ++i) acc[i] = _mm512_fmadd_ps(acc[i], m, a);
  __m512 s = acc[0];
  for (int i = 1; i < 16; ++i) s = _mm512_add_ps(s, acc[i]);
  return hsum512(s);
}

__attribute__((target("avx2,fma"))) float fma_loop_avx2(std::int64_t iters) {
  __m256 acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = _mm256_set1_ps(0.001f * static_cast<float>(i));
  const __m256 m = _mm256_set1_ps(0.999999f), a = _mm256_set1_ps(1e-7f);
  for (std::int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 16; ++i) acc[i] = _mm256_fmadd_ps(acc[i], m, a);
  __m256 s = acc[0];
  for (int i = 1; i < 16; ++i) s = _mm256_add_ps(s, acc[i]);
  alignas(32) float v[8];
  _mm256_store_ps(v, s);
  return v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
}

float fma_loop_scalar(std::int64_t iters) {
  float acc[16];
  for (int i = 0; i < 16; ++i) acc[i] = 0.001f * static_cast<float>(i);
  for (std::int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < 16; ++i) acc[i] = acc[i] * 0.999999f + 1e-7f;
  float s = 0;
  for (float v : acc) s += v;
  return s;
}

int lanes() {
  const CpuInfo& c = cpu_info();
  if (c.avx512f) return 16;
  if (c.avx2 && c.fma) return 8;
  return 1;
}

float fma_loop(std::int64_t iters) {
  switch (lanes()) {
    case 16: return fma_loop_avx512(iters);
    case 8: return fma_loop_avx2(iters);
    default: return fma_loop_scalar(iters);
  }
}

__attribute__((target("avx512f"))) float sum_avx512(const float* p, std::int64_t n) {
  __m512 acc[8];
  for (auto& a : acc) a = _mm512_setzero_ps();
  std::int64_t i = 0;
  for (; i + 128 <= n; i += 128)
    for (int k = 0; k < 8; ++k) acc[k] = _mm512_add_ps(acc[k], _mm512_load_ps(p + i + 16 * k));
  float s = 0;
  for (; i < n; ++i) s += p[i];
  for (int k = 1; k < 8; ++k) acc[0] = _mm512_add_ps(acc[0], acc[k]);
  return s + hsum512(acc[0]);
}

float sum_plain(const float* p, std::int64_t n) {
  float acc[8] = {};
  std::int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k) acc[k] += p[i + k];
  for (; i < n; ++i) acc[0] += p[i];
  float s = 0;
  for (float a : acc) s += a;
  return s;
}


}  // namespace

const char* fma_isa_name() {
  switch (lanes()) {
    case 16: return "avx512";
    case 8: return "avx2";
    default: return "scalar";
  }
}

double peak_gflops(int threads, int reps) {
  const std::int64_t iters = lanes() == 1 ? kPeakIters / 8 : kPeakIters;
  const double flops_per_thread = 2.0 * 16 * lanes() * static_cast<double>(iters);
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    const double t0 = now();
    float sink = 0;
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    sink += fma_loop(iters);
    const double dt = now() - t0;
    g_sink = sink;
    best = std::max(best, flops_per_thread * threads / dt * 1e-9);
  }
  return best;
}

double read_bandwidth_gbs(std::int64_t bytes, int threads, int reps) {
  const std::int64_t n = bytes / 4;
  float* p = static_cast<float*>(std::aligned_alloc(64, static_cast<std::size_t>(n) * 4));
  if (p == nullptr) return 0;
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t i = 0; i < n; ++i) p[i] = 1.0f;  // first touch by the reading threads
  const bool wide = cpu_info().avx512f;
  double best = 0;
  for (int r = 0; r < reps; ++r) {
    const double t0 = now();
    float sink = 0;
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    {
      const std::int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
      const std::int64_t chunk = (n / nt + 127) / 128 * 128;  // 512-byte aligned pieces
      const std::int64_t s = std::min(n, t * chunk), e = std::min(n, s + chunk);
      sink += wide ? sum_avx512(p + s, e - s) : sum_plain(p + s, e - s);
    }
    const double dt = now() - t0;
    g_sink = sink;
    best = std::max(best, static_cast<double>(bytes) / dt * 1e-9);
  }
  std::free(p);
  return best;
}

}  // namespace tfm::cli
