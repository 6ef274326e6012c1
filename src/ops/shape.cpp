// Shape ops (views) with their backward rules beside them.
#include "tfm/ops/shape.h"

#include <algorithm>
#include <numeric>

#include "kernels/reduce.h"
#include "tfm/autograd.h"
#include "tfm/error.h"

namespace tfm {
namespace {

std::int64_t wrap_dim(std::int64_t d, std::int64_t ndim, const char* op) {
  TFM_CHECK(d >= -ndim && d < ndim, op, "dim ", d, " out of range for a ", ndim, "-d tensor");
  return d < 0 ? d + ndim : d;
}

// Strides for viewing (shape, strides) as new_shape without copying; empty if impossible.
// Old dims are grouped into chunks that are contiguous among themselves; each chunk must map
// onto a run of new dims with the same element count (the rule PyTorch's view uses).
bool view_strides(const Shape& shape, const Shape& strides, const Shape& new_shape, Shape& out) {
  out.assign(new_shape.size(), 0);
  if (shape_numel(shape) == 0 || shape.empty()) {
    out = contiguous_strides(new_shape);
    return true;
  }
  std::int64_t view_d = static_cast<std::int64_t>(new_shape.size()) - 1;
  std::int64_t chunk_stride = strides.back(), tensor_numel = 1, view_numel = 1;
  for (std::int64_t d = static_cast<std::int64_t>(shape.size()) - 1; d >= 0; --d) {
    tensor_numel *= shape[static_cast<std::size_t>(d)];
    const bool chunk_ends = d == 0 || (shape[static_cast<std::size_t>(d - 1)] != 1 &&
                                       strides[static_cast<std::size_t>(d - 1)] != tensor_numel * chunk_stride);
    if (!chunk_ends) continue;
    while (view_d >= 0 && (view_numel < tensor_numel || new_shape[static_cast<std::size_t>(view_d)] == 1)) {
      out[static_cast<std::size_t>(view_d)] = view_numel * chunk_stride;
      view_numel *= new_shape[static_cast<std::size_t>(view_d)];
      --view_d;
    }
    if (view_numel != tensor_numel) return false;
    if (d > 0) {
      chunk_stride = strides[static_cast<std::size_t>(d - 1)];
      tensor_numel = 1;
      view_numel = 1;
    }
  }
  return view_d == -1;
}

Tensor view_like(const Tensor& x, const Shape& shape, const Shape& strides, std::int64_t offset) {
  return x.as_strided(shape, strides, offset);
}

}  // namespace

Tensor reshape(const Tensor& x, Shape shape) {
  std::int64_t known = 1, infer = -1;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      TFM_CHECK(infer < 0, "reshape", "only one dim may be -1 in ", shape_str(shape));
      infer = static_cast<std::int64_t>(i);
    } else {
      TFM_CHECK(shape[i] >= 0, "reshape", "bad size in ", shape_str(shape));
      known *= shape[i];
    }
  }
  if (infer >= 0) {
    TFM_CHECK(known != 0 && x.numel() % known == 0, "reshape", shape_str(x.shape()), " -> ", shape_str(shape),
              ": cannot infer the -1 dim");
    shape[static_cast<std::size_t>(infer)] = x.numel() / known;
  }
  TFM_CHECK(shape_numel(shape) == x.numel(), "reshape", shape_str(x.shape()), " -> ", shape_str(shape), ": ",
            x.numel(), " elements != ", shape_numel(shape));
  Shape st;
  TFM_CHECK(view_strides(x.shape(), x.strides(), shape, st), "reshape", shape_str(x.shape()), " with strides ", shape_str(x.strides()),
            " cannot be viewed as ", shape_str(shape), "; call contiguous() first");
  Tensor out = view_like(x, shape, st, x.offset());
  if (autograd::needs_grad({&x})) {
    autograd::record("reshape", out, [x, in_shape = x.shape()](const Tensor& g) {
      autograd::accumulate(x, reshape(g, in_shape));
    });
  }
  return out;
}

Tensor permute(const Tensor& x, const std::vector<std::int64_t>& dims) {
  const std::int64_t nd = x.dim();
  TFM_CHECK(static_cast<std::int64_t>(dims.size()) == nd, "permute", dims.size(), " dims given for a ", nd,
            "-d tensor");
  Shape shape(dims.size()), strides(dims.size());
  std::vector<std::int64_t> inverse(dims.size(), -1);
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const std::int64_t d = wrap_dim(dims[i], nd, "permute");
    TFM_CHECK(inverse[static_cast<std::size_t>(d)] < 0, "permute", "dim ", d, " repeated");
    inverse[static_cast<std::size_t>(d)] = static_cast<std::int64_t>(i);
    shape[i] = x.shape()[static_cast<std::size_t>(d)];
    strides[i] = x.strides()[static_cast<std::size_t>(d)];
  }
  Tensor out = view_like(x, shape, strides, x.offset());
  if (autograd::needs_grad({&x})) {
    autograd::record("permute", out, [x, inverse](const Tensor& g) { autograd::accumulate(x, permute(g, inverse)); });
  }
  return out;
}

Tensor transpose(const Tensor& x, std::int64_t d0, std::int64_t d1) {
  std::vector<std::int64_t> dims(static_cast<std::size_t>(x.dim()));
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[static_cast<std::size_t>(wrap_dim(d0, x.dim(), "transpose"))],
            dims[static_cast<std::size_t>(wrap_dim(d1, x.dim(), "transpose"))]);
  return permute(x, dims);
}

Tensor slice(const Tensor& x, std::int64_t dim, std::int64_t start, std::int64_t end, std::int64_t step) {
  const std::int64_t d = wrap_dim(dim, x.dim(), "slice");
  const std::int64_t n = x.shape()[static_cast<std::size_t>(d)];
  TFM_CHECK(step >= 1, "slice", "step must be >= 1, got ", step);
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<std::int64_t>(start, 0, n);
  end = std::clamp<std::int64_t>(end, start, n);
  Shape shape = x.shape(), strides = x.strides();
  shape[static_cast<std::size_t>(d)] = (end - start + step - 1) / step;
  strides[static_cast<std::size_t>(d)] *= step;
  Tensor out = view_like(x, shape, strides, x.offset() + start * x.strides()[static_cast<std::size_t>(d)]);
  if (autograd::needs_grad({&x})) {
    autograd::record("slice", out, [x, d, start, end, step](const Tensor& g) {
      Tensor full = Tensor::zeros(x.shape());
      Tensor window = slice(full, d, start, end, step);
      window.copy_(g);
      autograd::accumulate(x, full);
    });
  }
  return out;
}

Tensor expand(const Tensor& x, const Shape& shape) {
  const std::size_t nd = shape.size(), xd = x.shape().size();
  TFM_CHECK(nd >= xd, "expand", shape_str(x.shape()), " -> ", shape_str(shape), ": fewer dims");
  Shape strides(nd, 0);
  for (std::size_t i = 0; i < nd; ++i) {
    if (i < nd - xd) continue;  // new leading dim: stride 0
    const std::size_t j = i - (nd - xd);
    const std::int64_t s = x.shape()[j];
    TFM_CHECK(s == shape[i] || s == 1, "expand", shape_str(x.shape()), " -> ", shape_str(shape), ": dim ", i,
              " has size ", s, ", not 1 or ", shape[i]);
    strides[i] = s == 1 && shape[i] != 1 ? 0 : x.strides()[j];
  }
  Tensor out = view_like(x, shape, strides, x.offset());
  if (autograd::needs_grad({&x})) {
    autograd::record("expand", out, [x](const Tensor& g) { autograd::accumulate(x, sum_to_shape(g, x.shape())); });
  }
  return out;
}

Tensor unsqueeze(const Tensor& x, std::int64_t dim) {
  const std::int64_t d = wrap_dim(dim, x.dim() + 1, "unsqueeze");
  Shape shape = x.shape();
  shape.insert(shape.begin() + d, 1);
  return reshape(x, shape);
}

Tensor squeeze(const Tensor& x, std::int64_t dim) {
  const std::int64_t d = wrap_dim(dim, x.dim(), "squeeze");
  TFM_CHECK(x.shape()[static_cast<std::size_t>(d)] == 1, "squeeze", "dim ", d, " of ", shape_str(x.shape()),
            " has size ", x.shape()[static_cast<std::size_t>(d)], ", not 1");
  Shape shape = x.shape();
  shape.erase(shape.begin() + d);
  return reshape(x, shape);
}

Tensor contiguous(const Tensor& x) {
  if (x.is_contiguous()) return x;
  Tensor out = x.clone();
  if (autograd::needs_grad({&x})) {
    autograd::record("contiguous", out, [x](const Tensor& g) { autograd::accumulate(x, g); });
  }
  return out;
}

Tensor cast(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  Tensor out = Tensor::empty(x.shape(), dtype);
  out.copy_(x);
  if (autograd::needs_grad({&x})) {
    TFM_CHECK(dtype_is_float(dtype), "cast", "cannot differentiate a cast to ", dtype_name(dtype));
    autograd::record("cast", out, [x](const Tensor& g) {
      Tensor gx = Tensor::empty(g.shape(), x.dtype());
      gx.copy_(g);
      autograd::accumulate(x, gx);  // accumulate stores f32
    });
  }
  return out;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const std::size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t x = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const std::int64_t y = i < n - b.size() ? 1 : b[i - (n - b.size())];
    TFM_CHECK(x == y || x == 1 || y == 1, op, shape_str(a), " and ", shape_str(b), " do not broadcast (dim ", i,
              ": ", x, " vs ", y, ")");
    out[i] = x == 1 ? y : x;
  }
  return out;
}

Tensor sum_to_shape(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  // Sum over the leading dims g has extra, and over dims where `shape` has size 1.
  const std::size_t nd = g.shape().size(), td = shape.size();
  TFM_CHECK(nd >= td, "sum_to_shape", shape_str(g.shape()), " -> ", shape_str(shape));
  std::vector<bool> reduced(nd, false);  // dims summed away
  for (std::size_t i = 0; i < nd; ++i) {
    if (i < nd - td) {
      reduced[i] = true;
      continue;
    }
    const std::size_t j = i - (nd - td);
    TFM_CHECK(shape[j] == g.shape()[i] || shape[j] == 1, "sum_to_shape", shape_str(g.shape()), " -> ",
              shape_str(shape));
    reduced[i] = shape[j] == 1 && g.shape()[i] != 1;
  }
  if (g.numel() == 0) return Tensor::zeros(shape);
  // A contiguous f32 copy (no autograd: this is a backward helper).
  Tensor cur = g;
  if (g.dtype() != DType::f32 || !g.is_contiguous()) {
    cur = Tensor::empty(g.shape());
    cur.copy_(g);
  }
  // Each maximal run of summed dims [i0, i1) is one (outer, mid, inner) middle-dim sum on the
  // deterministic kernels, runs taken right to left: (B,T,C) -> (C) is one column sum over
  // B·T rows, (B,T,C) -> (1,T,1) a row sum over C then a column sum over B.
  Shape cur_shape = g.shape();
  for (std::size_t i1 = nd; i1 > 0;) {
    if (!reduced[i1 - 1]) {
      --i1;
      continue;
    }
    std::size_t i0 = i1 - 1;
    while (i0 > 0 && reduced[i0 - 1]) --i0;
    std::int64_t outer = 1, mid = 1, inner = 1;
    for (std::size_t i = 0; i < nd; ++i) (i < i0 ? outer : i < i1 ? mid : inner) *= cur_shape[i];
    for (std::size_t i = i0; i < i1; ++i) cur_shape[i] = 1;
    Tensor next = Tensor::empty(cur_shape);
    kernels::sum_middle(cur.data<float>(), next.data<float>(), outer, mid, inner);
    cur = next;
    i1 = i0;
  }
  return cur.as_strided(shape, contiguous_strides(shape), cur.offset());
}

}  // namespace tfm
