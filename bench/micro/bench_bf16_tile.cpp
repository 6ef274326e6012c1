// Probe behind the C-line prefetch in the native bf16 GEMM (docs/benchmarks.md, "C lines
// claimed during the k loop"): the VDPBF16PS peak of one core, then the 12 x 32 micro-tile's
// inner loop over the GEMM's real block structure (8 A panels x 4 B panels, packed bf16 pair
// panels, C fp32 row-major) on the nanoGPT training shapes, with C's stores
//   as shipped before          - no prefetch;
//   C kept in L1               - every call writes the same tile (the bound: no store misses);
//   claimed up front           - prefetchw of the tile's 24 C lines at the start of the call;
//   claimed one per 4 k-pairs  - the same lines spread over the k loop (what the kernel does).
// Plain data, not our kernel: the loop is copied here so the variants can sit side by side.
//   build/bin/bench_bf16_tile
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"  // gcc 12's _mm512_reduce_add_ps
#endif
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

namespace {

constexpr int kMR = 12, kNR = 32;
enum class Store { plain, hot, upfront, spread };

__attribute__((target("avx512f,avx512bf16"))) double peak_gflops() {
  __m512 acc[24];
  for (auto& a : acc) a = _mm512_setzero_ps();
  const __m512bh x = (__m512bh)_mm512_set1_epi32(0x3f803f80), y = (__m512bh)_mm512_set1_epi32(0x00010001);
  const long n = 200000000 / 24;
  const auto t0 = std::chrono::steady_clock::now();
  for (long i = 0; i < n; ++i) {
#pragma GCC unroll 24
    for (auto& a : acc) a = _mm512_dpbf16_ps(a, x, y);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  __m512 t = acc[0];
  for (int i = 1; i < 24; ++i) t = _mm512_add_ps(t, acc[i]);
  volatile float sink = _mm512_reduce_add_ps(t);
  (void)sink;
  return n * 24.0 * 64 / s / 1e9;  // 16 lanes x 2 pairs x 2 flops per instruction
}

template <Store S>
__attribute__((target("avx512f,avx512bf16,prfchw"), noinline)) void micro(long P, const std::uint32_t* a,
                                                                          const std::uint32_t* b, float* C, long ldc) {
  __m512 acc[kMR][2];
  for (auto& row : acc) row[0] = row[1] = _mm512_setzero_ps();
  if (S == Store::upfront)
    for (int r = 0; r < kMR; ++r) {
      __builtin_prefetch(C + r * ldc, 1, 3);
      __builtin_prefetch(C + r * ldc + 16, 1, 3);
    }
  for (long p = 0; p < P; ++p) {
    if (S == Store::spread && (p & 3) == 0 && (p >> 2) < 2 * kMR)
      __builtin_prefetch(C + (p >> 3) * ldc + 16 * ((p >> 2) & 1), 1, 3);
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(b + p * kNR), b1 = (__m512bh)_mm512_loadu_si512(b + p * kNR + 16);
    for (int r = 0; r < kMR; ++r) {
      const __m512bh av = (__m512bh)_mm512_set1_epi32(static_cast<int>(a[p * kMR + r]));
      acc[r][0] = _mm512_dpbf16_ps(acc[r][0], av, b0);
      acc[r][1] = _mm512_dpbf16_ps(acc[r][1], av, b1);
    }
  }
  for (int r = 0; r < kMR; ++r) {
    _mm512_storeu_ps(C + r * ldc, acc[r][0]);
    _mm512_storeu_ps(C + r * ldc + 16, acc[r][1]);
  }
}

template <Store S>
double blocked_gflops(long M, long N, long K) {
  const long P = K / 2, na = (M + kMR - 1) / kMR, nb = N / kNR, ldc = N;
  std::vector<std::uint32_t> A(static_cast<std::size_t>(na * kMR * P)), B(static_cast<std::size_t>(nb * kNR * P));
  // Bounded finite bf16 pairs (1.0 with low mantissa bits varied), so the products stay normal.
  for (std::size_t i = 0; i < A.size(); ++i) A[i] = 0x3f803f80u ^ (static_cast<std::uint32_t>(i * 2654435761u) & 0x007f007fu);
  for (std::size_t i = 0; i < B.size(); ++i) B[i] = 0x3f803f80u ^ (static_cast<std::uint32_t>(i * 40503u) & 0x007f007fu);
  std::vector<float> C(static_cast<std::size_t>(na * kMR * ldc));
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    for (long bi = 0; bi < na; bi += 8)
      for (long bj = 0; bj < nb; bj += 4)
        for (long j = bj; j < std::min(nb, bj + 4); ++j)
          for (long i = bi; i < std::min(na, bi + 8); ++i)
            micro<S>(P, A.data() + i * kMR * P, B.data() + j * kNR * P,
                     S == Store::hot ? C.data() : C.data() + i * kMR * ldc + j * kNR, ldc);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, 2.0 * M * N * K / s / 1e9);
  }
  return best;
}

}  // namespace

int main() {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512bf16")) {
    std::puts("bench_bf16_tile: this CPU has no AVX512_BF16; nothing to measure");
    return 0;
  }
  std::printf("vdpbf16ps peak, one core: %.1f GFLOP/s\n", peak_gflops());
  std::printf("%-20s %12s %12s %12s %12s   (GFLOP/s, best of 5)\n", "M x N x K", "plain", "C in L1", "up front",
              "spread");
  const long shapes[][3] = {{4096, 1152, 384}, {4096, 1536, 384}, {4096, 384, 1536}};
  for (const auto& s : shapes) {
    char name[32];
    std::snprintf(name, sizeof name, "%ld x %ld x %ld", s[0], s[1], s[2]);
    std::printf("%-20s %12.1f %12.1f %12.1f %12.1f\n", name, blocked_gflops<Store::plain>(s[0], s[1], s[2]),
                blocked_gflops<Store::hot>(s[0], s[1], s[2]), blocked_gflops<Store::upfront>(s[0], s[1], s[2]),
                blocked_gflops<Store::spread>(s[0], s[1], s[2]));
  }
  return 0;
}
