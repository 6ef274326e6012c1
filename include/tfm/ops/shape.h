// Shape ops: views that share data (reshape, permute, slice, expand, ...) and the copies
// that materialise them. All are differentiable.
#pragma once

#include <vector>

#include "tfm/tensor.h"

namespace tfm {

// A view with a new shape (one entry may be -1: inferred). Needs a compatible layout; call
// contiguous() first otherwise (the error says so).
Tensor reshape(const Tensor& x, Shape shape);
// Reorder dimensions: out.shape[i] = x.shape[dims[i]].
Tensor permute(const Tensor& x, const std::vector<std::int64_t>& dims);
Tensor transpose(const Tensor& x, std::int64_t d0, std::int64_t d1);
// Elements start, start+step, ... < end along dim (negative start/end count from the end).
Tensor slice(const Tensor& x, std::int64_t dim, std::int64_t start, std::int64_t end, std::int64_t step = 1);
// Broadcast size-1 dims (and new leading dims) to `shape` without copying (stride 0).
Tensor expand(const Tensor& x, const Shape& shape);
Tensor unsqueeze(const Tensor& x, std::int64_t dim);
Tensor squeeze(const Tensor& x, std::int64_t dim);  // dim must have size 1
// Row-major copy (returns x itself when already contiguous).
Tensor contiguous(const Tensor& x);
// Convert to another float dtype (the backward casts the gradient back to f32).
Tensor cast(const Tensor& x, DType dtype);

// The shape two operands broadcast to (NumPy rules); throws naming `op` when they cannot.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);
// Sum a gradient of broadcast shape back to `shape` (the backward of expand/broadcasting).
Tensor sum_to_shape(const Tensor& g, const Shape& shape);

}  // namespace tfm
