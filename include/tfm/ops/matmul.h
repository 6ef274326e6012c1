// Matrix products. Both are differentiable; transposed views are read in place (the GEMM is
// told to transpose) instead of being copied.
#pragma once

#include "tfm/tensor.h"

namespace tfm {

// PyTorch's torch.matmul for f32:
//   a (..., M, K) @ b (..., K, N) -> (broadcast(...), M, N)   batch dims broadcast (NumPy rules)
//   a 1-D (K) is treated as (1, K) and b 1-D (K) as (K, 1); the added dim is dropped again.
Tensor matmul(const Tensor& a, const Tensor& b);

// torch.nn.functional.linear: x (..., in), w (out, in), b (out) or undefined -> (..., out),
// y = x wᵀ + b.
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b = Tensor());

}  // namespace tfm
