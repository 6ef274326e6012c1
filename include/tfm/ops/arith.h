// Elementwise arithmetic with NumPy broadcasting, scalar forms, masking, and the operator
// overloads. All take f32 tensors of any strides and return a new contiguous f32 tensor;
// all are differentiable (a broadcast operand's gradient is summed back to its shape).
//
//   Tensor y = x + bias;          // (B, T, C) + (C) -> (B, T, C)
//   Tensor z = a * b - 1.0f;      // (B, 1, C) * (1, T, 1) -> (B, T, C)
//
// Shapes that do not broadcast throw tfm::Error naming the op and both shapes:
//   [add] (2,3) and (4) do not broadcast (dim 1: 3 vs 4)
#pragma once

#include "tfm/tensor.h"

namespace tfm {

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);

Tensor add_scalar(const Tensor& x, float s);  // x + s
Tensor mul_scalar(const Tensor& x, float s);  // x * s
Tensor neg(const Tensor& x);                  // -x

Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);           // 1 / sqrt(x)
Tensor pow(const Tensor& x, float p);    // x^p elementwise
Tensor abs(const Tensor& x);             // gradient sign(x) (0 at 0, as PyTorch)

// out = x where mask == 0, value where mask != 0. mask: u8, broadcastable to x's shape.
// Gradient flows to x where the mask is 0.
Tensor masked_fill(const Tensor& x, const Tensor& mask, float value);
// out = mask ? a : b, shapes of all three broadcast together (mask: u8).
Tensor where(const Tensor& mask, const Tensor& a, const Tensor& b);

// Operators (differentiable, same rules as the named functions).
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& x);
Tensor operator+(const Tensor& x, float s);
Tensor operator+(float s, const Tensor& x);
Tensor operator-(const Tensor& x, float s);
Tensor operator-(float s, const Tensor& x);
Tensor operator*(const Tensor& x, float s);
Tensor operator*(float s, const Tensor& x);
Tensor operator/(const Tensor& x, float s);

}  // namespace tfm
