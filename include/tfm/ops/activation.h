// Activation functions and the other transcendental maps: f32 in (any strides), contiguous
// f32 out of the same shape, differentiable. Kernels: src/kernels/activation.h.
#pragma once

#include "tfm/tensor.h"

namespace tfm {

enum class GeluApprox { none, tanh };  // PyTorch's approximate='none' | 'tanh'

Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x, GeluApprox approximate = GeluApprox::none);
Tensor silu(const Tensor& x);  // x * sigmoid(x)
Tensor quick_gelu(const Tensor& x);  // x * sigmoid(1.702 x): OpenAI CLIP's GELU approximation
Tensor sigmoid(const Tensor& x);
Tensor tanh(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);

}  // namespace tfm
