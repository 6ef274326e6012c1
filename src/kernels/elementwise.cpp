// Elementwise arithmetic. Plain loops: GCC vectorises them for the baseline ISA and they are
// memory-bound, so per-ISA builds buy little here (measured in bench/).
#include "kernels/elementwise.h"

#include "kernels/parallel.h"

namespace tfm::kernels {
namespace {
constexpr std::int64_t kGrain = 1 << 15;

template <class Op>
void binary(const float* a, const float* b, float* y, std::int64_t n, Op op) {
  parallel_for(n, kGrain, [&](std::int64_t s, std::int64_t e) {
    for (std::int64_t i = s; i < e; ++i) y[i] = op(a[i], b[i]);
  });
}
}  // namespace

void add(const float* a, const float* b, float* y, std::int64_t n) { binary(a, b, y, n, [](float u, float v) { return u + v; }); }
void sub(const float* a, const float* b, float* y, std::int64_t n) { binary(a, b, y, n, [](float u, float v) { return u - v; }); }
void mul(const float* a, const float* b, float* y, std::int64_t n) { binary(a, b, y, n, [](float u, float v) { return u * v; }); }
void div(const float* a, const float* b, float* y, std::int64_t n) { binary(a, b, y, n, [](float u, float v) { return u / v; }); }

void axpy(float alpha, const float* x, float* y, std::int64_t n) {
  parallel_for(n, kGrain, [&](std::int64_t s, std::int64_t e) {
    for (std::int64_t i = s; i < e; ++i) y[i] += alpha * x[i];
  });
}

void scale(const float* x, float alpha, float* y, std::int64_t n) {
  parallel_for(n, kGrain, [&](std::int64_t s, std::int64_t e) {
    for (std::int64_t i = s; i < e; ++i) y[i] = alpha * x[i];
  });
}

}  // namespace tfm::kernels
