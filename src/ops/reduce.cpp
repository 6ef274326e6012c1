// Reductions over one dim or all elements, on the deterministic kernels of
// src/kernels/reduce.h, with their backward rules.
#include "tfm/ops/reduce.h"

#include <memory>
#include <vector>

#include "kernels/parallel.h"
#include "kernels/reduce.h"
#include "ops/broadcast.h"
#include "tfm/autograd.h"
#include "tfm/error.h"
#include "tfm/ops/arith.h"
#include "tfm/ops/shape.h"

namespace tfm {
namespace {

// x viewed as (outer, mid, inner) around dim d.
struct Split {
  std::int64_t dim = 0, outer = 1, mid = 1, inner = 1;
  Shape out_shape, keep_shape;  // without / with the reduced dim (as size 1)
};

Split split_at(const Tensor& x, std::int64_t dim, bool keepdim, const char* op) {
  const std::int64_t nd = x.dim();
  TFM_CHECK(dim >= -nd && dim < nd, op, "dim ", dim, " out of range for ", shape_str(x.shape()));
  Split s;
  s.dim = dim < 0 ? dim + nd : dim;
  for (std::int64_t i = 0; i < nd; ++i) {
    const std::int64_t n = x.shape()[static_cast<std::size_t>(i)];
    if (i < s.dim) s.outer *= n;
    else if (i == s.dim) s.mid = n;
    else s.inner *= n;
  }
  s.keep_shape = x.shape();
  s.keep_shape[static_cast<std::size_t>(s.dim)] = 1;
  s.out_shape = x.shape();
  s.out_shape.erase(s.out_shape.begin() + s.dim);
  if (keepdim) s.out_shape = s.keep_shape;
  return s;
}

Tensor contiguous_data(const Tensor& x) { return x.is_contiguous() ? x : x.clone(); }

// The gradient of a reduction broadcast back over x (a stride-0 view; accumulate copies it).
Tensor spread(const Tensor& g, const Split& s, const Shape& x_shape) {
  return expand(reshape(g, s.keep_shape), x_shape);
}

// Max along the middle dim of (outer, mid, inner): values and first-max positions.
void max_middle(const float* x, float* y, std::int64_t* idx, const Split& s) {
  if (s.inner == 1) return kernels::row_max(x, y, idx, s.outer, s.mid);
  kernels::parallel_for(s.outer * s.inner, (1 << 14) / s.mid + 1, [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t it = i0; it < i1; ++it) {
      const std::int64_t o = it / s.inner, i = it % s.inner;
      const float* p = x + o * s.mid * s.inner + i;
      std::int64_t best = 0;
      for (std::int64_t m = 1; m < s.mid; ++m)
        if (p[m * s.inner] > p[best * s.inner]) best = m;
      y[it] = p[best * s.inner];
      idx[it] = best;
    }
  });
}

}  // namespace

Tensor sum(const Tensor& x, std::int64_t dim, bool keepdim) {
  ops_detail::check_f32(x, "sum");
  const Split s = split_at(x, dim, keepdim, "sum");
  const Tensor xc = contiguous_data(x);
  Tensor out = Tensor::empty(s.out_shape);
  if (s.mid == 0) out.fill_(0.0f);
  else kernels::sum_middle(xc.data<float>(), out.data<float>(), s.outer, s.mid, s.inner);
  if (autograd::needs_grad({&x})) {
    autograd::record("sum", out, [x, s](const Tensor& g) { autograd::accumulate(x, spread(g, s, x.shape())); });
  }
  return out;
}

Tensor mean(const Tensor& x, std::int64_t dim, bool keepdim) {
  ops_detail::check_f32(x, "mean");
  const Split s = split_at(x, dim, keepdim, "mean");
  TFM_CHECK(s.mid > 0, "mean", "dim ", dim, " of ", shape_str(x.shape()), " is empty");
  Tensor total;
  {
    NoGradGuard ng;
    total = sum(x, dim, keepdim);
  }
  // Divide (not multiply by 1/n) to round as PyTorch does.
  Tensor out;
  {
    NoGradGuard ng;
    out = total / static_cast<float>(s.mid);
  }
  if (autograd::needs_grad({&x})) {
    autograd::record("mean", out, [x, s](const Tensor& g) {
      autograd::accumulate(x, spread(g / static_cast<float>(s.mid), s, x.shape()));
    });
  }
  return out;
}

namespace {
// Values and first-max positions along `dim` (the shared forward of max and argmax).
struct MaxAlong {
  Split split;
  Tensor values, index;  // out_shape; index i64
};
MaxAlong max_along(const Tensor& x, std::int64_t dim, bool keepdim, const char* op) {
  ops_detail::check_f32(x, op);
  MaxAlong m{split_at(x, dim, keepdim, op), Tensor(), Tensor()};
  TFM_CHECK(m.split.mid > 0, op, "dim ", dim, " of ", shape_str(x.shape()), " is empty");
  const Tensor xc = contiguous_data(x);
  m.values = Tensor::empty(m.split.out_shape);
  m.index = Tensor::empty(m.split.out_shape, DType::i64);
  max_middle(xc.data<float>(), m.values.data<float>(), m.index.data<std::int64_t>(), m.split);
  return m;
}
}  // namespace

Tensor max(const Tensor& x, std::int64_t dim, bool keepdim) {
  MaxAlong m = max_along(x, dim, keepdim, "max");
  const Split& s = m.split;
  Tensor out = m.values;
  const Tensor idx = m.index;  // (outer·inner) first-max positions
  if (autograd::needs_grad({&x})) {
    autograd::record("max", out, [x, s, idx](const Tensor& g) {
      Tensor gx = Tensor::zeros(x.shape());
      const std::int64_t* pi = idx.data<std::int64_t>();
      const float* pg = g.data<float>();
      float* px = gx.data<float>();
      kernels::parallel_for(s.outer * s.inner, 1 << 14, [&](std::int64_t i0, std::int64_t i1) {
        for (std::int64_t it = i0; it < i1; ++it) {
          const std::int64_t o = it / s.inner, i = it % s.inner;
          px[(o * s.mid + pi[it]) * s.inner + i] = pg[it];
        }
      });
      autograd::accumulate(x, gx);
    });
  }
  return out;
}

Tensor argmax(const Tensor& x, std::int64_t dim, bool keepdim) {
  return max_along(x, dim, keepdim, "argmax").index;
}

Tensor sum(const Tensor& x) {
  ops_detail::check_f32(x, "sum");
  const Tensor xc = contiguous_data(x);
  Tensor out = Tensor::full({}, kernels::sum_all(xc.data<float>(), xc.numel()));
  if (autograd::needs_grad({&x})) {
    autograd::record("sum", out, [x](const Tensor& g) { autograd::accumulate(x, expand(g, x.shape())); });
  }
  return out;
}

Tensor mean(const Tensor& x) {
  ops_detail::check_f32(x, "mean");
  TFM_CHECK(x.numel() > 0, "mean", "of an empty tensor ", shape_str(x.shape()));
  const Tensor xc = contiguous_data(x);
  const float n = static_cast<float>(x.numel());
  Tensor out = Tensor::full({}, kernels::sum_all(xc.data<float>(), xc.numel()) / n);
  if (autograd::needs_grad({&x})) {
    autograd::record("mean", out, [x, n](const Tensor& g) { autograd::accumulate(x, expand(g / n, x.shape())); });
  }
  return out;
}

Tensor max(const Tensor& x) {
  ops_detail::check_f32(x, "max");
  TFM_CHECK(x.numel() > 0, "max", "of an empty tensor ", shape_str(x.shape()));
  const Tensor xc = contiguous_data(x);
  const float m = kernels::max_all(xc.data<float>(), xc.numel());
  Tensor out = Tensor::full({}, m);
  if (autograd::needs_grad({&x})) {
    autograd::record("max", out, [x, xc, m](const Tensor& g) {
      // Split evenly between ties, as PyTorch's full max does.
      const float* p = xc.data<float>();
      std::int64_t ties = 0;
      for (std::int64_t i = 0; i < xc.numel(); ++i) ties += p[i] == m;
      const float share = g.item() / static_cast<float>(ties);
      Tensor gx = Tensor::zeros(x.shape());
      float* pg = gx.data<float>();
      for (std::int64_t i = 0; i < xc.numel(); ++i)
        if (p[i] == m) pg[i] = share;
      autograd::accumulate(x, gx);
    });
  }
  return out;
}

}  // namespace tfm
