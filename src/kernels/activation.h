// Activation functions over contiguous fp32 arrays: forward y = f(x) and backward
// dx = dy · f'(x) (recomputed from x, so a caller keeps only the input alive).
//
// GELU exact uses erfc (Numerical Recipes' Chebyshev fit, relative error < 1.2e-7); GELU tanh
// is Hendrycks & Gimpel's approximation 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))), computed
// as x·sigmoid(2u), which is the same function without cancellation for negative x.
#pragma once

#include <cstdint>

namespace tfm::kernels {

enum class Activation { relu, gelu, gelu_tanh, quick_gelu, silu, sigmoid, tanh, exp, log };
const char* activation_name(Activation f);

// Whole arrays, parallel over the engine's threads. y may alias x; dx may alias dy.
void activation_forward(Activation f, const float* x, float* y, std::int64_t n);
void activation_backward(Activation f, const float* x, const float* dy, float* dx, std::int64_t n);

// Per-ISA builds of one serial run (activation{,_avx2,_avx512}.cpp).
using ActivationForwardFn = void (*)(Activation, const float*, float*, std::int64_t);
using ActivationBackwardFn = void (*)(Activation, const float*, const float*, float*, std::int64_t);
void activation_forward_generic(Activation, const float*, float*, std::int64_t);
void activation_forward_avx2(Activation, const float*, float*, std::int64_t);
void activation_forward_avx512(Activation, const float*, float*, std::int64_t);
void activation_backward_generic(Activation, const float*, const float*, float*, std::int64_t);
void activation_backward_avx2(Activation, const float*, const float*, float*, std::int64_t);
void activation_backward_avx512(Activation, const float*, const float*, float*, std::int64_t);

namespace naive {
// Scalar, evaluated in double with libm (std::erfc, std::tanh, ...): the reference.
void activation_forward(Activation f, const float* x, float* y, std::int64_t n);
void activation_backward(Activation f, const float* x, const float* dy, float* dx, std::int64_t n);
}  // namespace naive

}  // namespace tfm::kernels
