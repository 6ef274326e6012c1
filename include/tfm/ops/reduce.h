// Reductions: sum / mean / max over one dim (keepdim keeps it as size 1) or over all
// elements (a 0-d result). f32 in (any strides), differentiable. Results are identical
// whatever the thread count (fixed summation order; see src/kernels/reduce.h).
#pragma once

#include <cstdint>

#include "tfm/tensor.h"

namespace tfm {

Tensor sum(const Tensor& x, std::int64_t dim, bool keepdim = false);
Tensor mean(const Tensor& x, std::int64_t dim, bool keepdim = false);
// The maximum along dim; the gradient goes to the first position holding it (as
// torch.max(x, dim)).
Tensor max(const Tensor& x, std::int64_t dim, bool keepdim = false);
// Index of the first maximum along dim (i64, not differentiable).
Tensor argmax(const Tensor& x, std::int64_t dim, bool keepdim = false);

Tensor sum(const Tensor& x);
Tensor mean(const Tensor& x);
// Gradient split evenly between tied maxima (as torch.max(x)).
Tensor max(const Tensor& x);

}  // namespace tfm
