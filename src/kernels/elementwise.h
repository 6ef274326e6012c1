// Elementwise arithmetic over fp32 arrays of n elements (broadcasting is done by the ops
// layer, which calls binary_run per innermost run). Outputs may alias inputs.
#pragma once

#include <cstdint>

namespace tfm::kernels {

enum class BinaryOp { add, sub, mul, div };

// Whole contiguous arrays, parallel over the engine's threads.
void add(const float* a, const float* b, float* y, std::int64_t n);  // y = a + b
void sub(const float* a, const float* b, float* y, std::int64_t n);  // y = a - b
void mul(const float* a, const float* b, float* y, std::int64_t n);  // y = a * b
void div(const float* a, const float* b, float* y, std::int64_t n);  // y = a / b
void axpy(float alpha, const float* x, float* y, std::int64_t n);    // y += alpha * x
void scale(const float* x, float alpha, float* y, std::int64_t n);   // y = alpha * x

// One run, serial: y[i] = a[i*sa] op b[i*sb], i < n, with sa, sb in {0, 1} (0 repeats a
// single value: the broadcast case). The function for the active ISA; fetch once per call.
using BinaryRunFn = void (*)(BinaryOp op, const float* a, std::int64_t sa, const float* b, std::int64_t sb,
                             float* y, std::int64_t n);
BinaryRunFn binary_run_kernel();

// Per-ISA builds (elementwise{,_avx2,_avx512}.cpp); tests compare each with the naive twin.
void binary_run_generic(BinaryOp, const float*, std::int64_t, const float*, std::int64_t, float*, std::int64_t);
void binary_run_avx2(BinaryOp, const float*, std::int64_t, const float*, std::int64_t, float*, std::int64_t);
void binary_run_avx512(BinaryOp, const float*, std::int64_t, const float*, std::int64_t, float*, std::int64_t);
void axpy_run_generic(float alpha, const float* x, float* y, std::int64_t n);
void axpy_run_avx2(float alpha, const float* x, float* y, std::int64_t n);
void axpy_run_avx512(float alpha, const float* x, float* y, std::int64_t n);

namespace naive {
// Plain scalar loops: the reference the SIMD builds are tested against.
void binary_run(BinaryOp op, const float* a, std::int64_t sa, const float* b, std::int64_t sb, float* y,
                std::int64_t n);
void axpy(float alpha, const float* x, float* y, std::int64_t n);
}  // namespace naive

}  // namespace tfm::kernels
