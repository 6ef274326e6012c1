// FMA peak and read bandwidth probes. The inner loops are compiled for AVX-512 / AVX2 with
// target attributes (the CLI is otherwise built for baseline x86-64) and picked at run time.
#include "bench_probe.h"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <vector>

#include "base/memory.h"
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

// Enough independent accumulator chains to cover FMA latency x FMA ports (4-5 cycles x 2 on the
// Xeons and Zen cores measured: >= 10 in flight), yet few enough to stay in registers with the
// two constants: a chain spilled to the stack adds a load and a store per FMA and halves the
// rate (the first version ran 16 ymm chains with 16 ymm registers and read 58 GFLOP/s per Zen 3
// core, half its 2 x 8-lane FMA peak). 16 zmm chains of 32 registers; 12 ymm chains of 16.
// Returns a value derived from the accumulators so the loop cannot be removed.
constexpr int kChains512 = 16, kChains256 = 12;

__attribute__((target("avx512f"))) float fma_loop_avx512(std::int64_t iters) {
  __m512 acc[kChains512];
  for (int i = 0; i < kChains512; ++i) acc[i] = _mm512_set1_ps(0.001f * static_cast<float>(i));
  const __m512 m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-7f);
  for (std::int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < kChains512; ++i) acc[i] = _mm512_fmadd_ps(acc[i], m, a);
  __m512 s = acc[0];
  for (int i = 1; i < kChains512; ++i) s = _mm512_add_ps(s, acc[i]);
  return hsum512(s);
}

__attribute__((target("avx2,fma"))) float fma_loop_avx2(std::int64_t iters) {
  __m256 acc[kChains256];
  for (int i = 0; i < kChains256; ++i) acc[i] = _mm256_set1_ps(0.001f * static_cast<float>(i));
  const __m256 m = _mm256_set1_ps(0.999999f), a = _mm256_set1_ps(1e-7f);
  for (std::int64_t it = 0; it < iters; ++it)
    for (int i = 0; i < kChains256; ++i) acc[i] = _mm256_fmadd_ps(acc[i], m, a);
  __m256 s = acc[0];
  for (int i = 1; i < kChains256; ++i) s = _mm256_add_ps(s, acc[i]);
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

// FMAs per iteration of the loop for the CPU's widest FMA.
int chains(int lanes) { return lanes == 16 ? kChains512 : lanes == 8 ? kChains256 : 16; }

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

// The read probes sum `streams` sequential runs side by side, one 64-byte line of each per step,
// with independent accumulators (the adds never wait on one another). Why several runs: a core's
// hardware prefetchers follow several streams at once, and one stream alone leaves bandwidth
// unused (a decode kernel reads several weight rows at a time); read_bandwidth_gbs reports the
// best stream count. The first probe (one stream; two SSE chains off AVX-512) read less than
// the f32 decode kernel streamed (116% of "the roofline" on a Zen 3).
__attribute__((target("avx512f"))) float sum_avx512(const float* p, std::int64_t n, int streams) {
  const std::int64_t part = n / streams / 16 * 16;
  __m512 acc[4];
  for (auto& a : acc) a = _mm512_setzero_ps();
  for (std::int64_t i = 0; i < part; i += 16)
    for (int s = 0; s < streams; ++s) acc[s & 3] = _mm512_add_ps(acc[s & 3], _mm512_load_ps(p + s * part + i));
  float t = 0;
  for (std::int64_t i = streams * part; i < n; ++i) t += p[i];
  return t + hsum512(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3])));
}

__attribute__((target("avx2"))) float sum_avx2(const float* p, std::int64_t n, int streams) {
  const std::int64_t part = n / streams / 16 * 16;
  __m256 acc[8];
  for (auto& a : acc) a = _mm256_setzero_ps();
  for (std::int64_t i = 0; i < part; i += 16)
    for (int s = 0; s < streams; ++s) {
      const float* q = p + s * part + i;
      acc[2 * (s & 3)] = _mm256_add_ps(acc[2 * (s & 3)], _mm256_load_ps(q));
      acc[2 * (s & 3) + 1] = _mm256_add_ps(acc[2 * (s & 3) + 1], _mm256_load_ps(q + 8));
    }
  float t = 0;
  for (std::int64_t i = streams * part; i < n; ++i) t += p[i];
  for (int k = 1; k < 8; ++k) acc[0] = _mm256_add_ps(acc[0], acc[k]);
  alignas(32) float v[8];
  _mm256_store_ps(v, acc[0]);
  return t + v[0] + v[1] + v[2] + v[3] + v[4] + v[5] + v[6] + v[7];
}

float sum_plain(const float* p, std::int64_t n, int streams) {
  const std::int64_t part = n / streams / 16 * 16;
  float acc[16] = {};
  for (std::int64_t i = 0; i < part; i += 16)
    for (int s = 0; s < streams; ++s)
      for (int k = 0; k < 16; ++k) acc[k] += p[s * part + i + k];
  float t = 0;
  for (std::int64_t i = streams * part; i < n; ++i) t += p[i];
  for (float a : acc) t += a;
  return t;
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
  const double flops_per_thread = 2.0 * chains(lanes()) * lanes() * static_cast<double>(iters);
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
  // The engine's allocator, as the weights are: in 2 MiB pages where the kernel gives them.
  float* p = static_cast<float*>(base::allocate(static_cast<std::size_t>(n) * 4));
#pragma omp parallel for num_threads(threads) schedule(static)
  for (std::int64_t i = 0; i < n; ++i) p[i] = 1.0f;  // first touch by the reading threads
  const int width = lanes();
  double best = 0;
  for (int streams : {1, 2, 4, 8})
    for (int r = 0; r < reps; ++r) {
      const double t0 = now();
      float sink = 0;
#pragma omp parallel num_threads(threads) reduction(+ : sink)
      {
        const std::int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
        const std::int64_t chunk = (n / nt + 127) / 128 * 128;  // 512-byte aligned pieces
        const std::int64_t s = std::min(n, t * chunk), e = std::min(n, s + chunk);
        sink += width == 16 ? sum_avx512(p + s, e - s, streams)
                : width == 8 ? sum_avx2(p + s, e - s, streams)
                             : sum_plain(p + s, e - s, streams);
      }
      const double dt = now() - t0;
      g_sink = sink;
      best = std::max(best, static_cast<double>(bytes) / dt * 1e-9);
    }
  base::release(p, static_cast<std::size_t>(n) * 4);
  return best;
}

}  // namespace tfm::cli
