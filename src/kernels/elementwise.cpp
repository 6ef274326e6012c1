// Elementwise arithmetic: dispatch, the baseline (SSE2) build and the naive twins.
// These kernels are memory-bound; the AVX builds mainly save instructions on data that is
// already in cache (bench/micro/bench_activations.cpp measures add).
#include "kernels/elementwise.h"

#include "kernels/dispatch.h"
#include "kernels/elementwise_impl.h"
#include "kernels/parallel.h"

namespace tfm::kernels {
namespace {
constexpr std::int64_t kGrain = 1 << 15;

void binary_all(BinaryOp op, const float* a, const float* b, float* y, std::int64_t n) {
  const BinaryRunFn run = binary_run_kernel();
  parallel_for(n, kGrain, [&](std::int64_t s, std::int64_t e) { run(op, a + s, 1, b + s, 1, y + s, e - s); });
}
}  // namespace

void binary_run_generic(BinaryOp op, const float* a, std::int64_t sa, const float* b, std::int64_t sb, float* y,
                        std::int64_t n) {
  impl::binary_run<simd::Generic>(op, a, sa, b, sb, y, n);
}
void axpy_run_generic(float alpha, const float* x, float* y, std::int64_t n) {
  impl::axpy_run<simd::Generic>(alpha, x, y, n);
}

BinaryRunFn binary_run_kernel() { return pick_isa(&binary_run_generic, &binary_run_avx2, &binary_run_avx512); }

void add(const float* a, const float* b, float* y, std::int64_t n) { binary_all(BinaryOp::add, a, b, y, n); }
void sub(const float* a, const float* b, float* y, std::int64_t n) { binary_all(BinaryOp::sub, a, b, y, n); }
void mul(const float* a, const float* b, float* y, std::int64_t n) { binary_all(BinaryOp::mul, a, b, y, n); }
void div(const float* a, const float* b, float* y, std::int64_t n) { binary_all(BinaryOp::div, a, b, y, n); }

void axpy(float alpha, const float* x, float* y, std::int64_t n) {
  auto run = pick_isa(&axpy_run_generic, &axpy_run_avx2, &axpy_run_avx512);
  parallel_for(n, kGrain, [&](std::int64_t s, std::int64_t e) { run(alpha, x + s, y + s, e - s); });
}

void scale(const float* x, float alpha, float* y, std::int64_t n) {
  const BinaryRunFn run = binary_run_kernel();
  parallel_for(n, kGrain, [&](std::int64_t s, std::int64_t e) { run(BinaryOp::mul, x + s, 1, &alpha, 0, y + s, e - s); });
}

namespace naive {
void binary_run(BinaryOp op, const float* a, std::int64_t sa, const float* b, std::int64_t sb, float* y,
                std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) {
    const float u = a[i * sa], v = b[i * sb];
    switch (op) {
      case BinaryOp::add: y[i] = u + v; break;
      case BinaryOp::sub: y[i] = u - v; break;
      case BinaryOp::mul: y[i] = u * v; break;
      case BinaryOp::div: y[i] = u / v; break;
    }
  }
}
void axpy(float alpha, const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] += alpha * x[i];
}
}  // namespace naive

}  // namespace tfm::kernels
