// Elementwise arithmetic over contiguous fp32 arrays of n elements (broadcasting is done by
// the ops layer, which calls these per contiguous run). Outputs may alias inputs.
#pragma once

#include <cstdint>

namespace tfm::kernels {

void add(const float* a, const float* b, float* y, std::int64_t n);  // y = a + b
void sub(const float* a, const float* b, float* y, std::int64_t n);  // y = a - b
void mul(const float* a, const float* b, float* y, std::int64_t n);  // y = a * b
void div(const float* a, const float* b, float* y, std::int64_t n);  // y = a / b
void axpy(float alpha, const float* x, float* y, std::int64_t n);    // y += alpha * x
void scale(const float* x, float alpha, float* y, std::int64_t n);   // y = alpha * x

}  // namespace tfm::kernels
