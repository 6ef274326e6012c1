// concat (a copy into slices of a new tensor) and split (views); both differentiable.
#include "ops/nn_util.h"
#include "tfm/autograd.h"
#include "tfm/ops/nn.h"
#include "tfm/ops/shape.h"

namespace tfm {

Tensor concat(const std::vector<Tensor>& tensors, std::int64_t dim) {
  TFM_CHECK(!tensors.empty(), "concat", "no tensors given");
  const Tensor& first = tensors.front();
  TFM_CHECK(first.defined(), "concat", "tensor 0 is undefined");
  TFM_CHECK(first.dim() >= 1, "concat", "cannot concatenate 0-d tensors");
  const std::int64_t d = nn_util::wrap_dim(dim, first.dim(), "concat");
  Shape shape = first.shape();
  shape[static_cast<std::size_t>(d)] = 0;
  bool grad = false;
  for (std::size_t k = 0; k < tensors.size(); ++k) {
    const Tensor& t = tensors[k];
    TFM_CHECK(t.defined(), "concat", "tensor ", k, " is undefined");
    TFM_CHECK(t.dtype() == first.dtype(), "concat", "tensor ", k, " is ", dtype_name(t.dtype()), ", tensor 0 is ",
              dtype_name(first.dtype()));
    TFM_CHECK(t.dim() == first.dim(), "concat", "tensor ", k, " ", shape_str(t.shape()), " and tensor 0 ",
              shape_str(first.shape()), " differ in rank");
    for (std::int64_t i = 0; i < t.dim(); ++i) {
      TFM_CHECK(i == d || t.size(i) == first.size(i), "concat", "tensor ", k, " ", shape_str(t.shape()),
                " and tensor 0 ", shape_str(first.shape()), " differ in dim ", i, " (concatenating along dim ", d, ")");
    }
    shape[static_cast<std::size_t>(d)] += t.size(d);
    grad = grad || autograd::needs_grad({&t});
  }
  Tensor out = Tensor::empty(shape, first.dtype());
  std::vector<std::int64_t> offsets;  // start of each input along d
  std::int64_t off = 0;
  for (const Tensor& t : tensors) {
    offsets.push_back(off);
    Shape window = shape;
    window[static_cast<std::size_t>(d)] = t.size(d);
    // A raw view (never recorded): out itself has no autograd history yet.
    out.as_strided(window, out.strides(), off * out.strides()[static_cast<std::size_t>(d)]).copy_(t);
    off += t.size(d);
  }
  if (grad) {
    autograd::record("concat", out, [tensors, offsets, d](const Tensor& g) {
      for (std::size_t k = 0; k < tensors.size(); ++k) {
        if (!tensors[k].requires_grad()) continue;
        autograd::accumulate(tensors[k], slice(g, d, offsets[k], offsets[k] + tensors[k].size(d)));
      }
    });
  }
  return out;
}

std::vector<Tensor> split(const Tensor& x, const std::vector<std::int64_t>& sizes, std::int64_t dim) {
  TFM_CHECK(x.defined(), "split", "input is undefined");
  const std::int64_t d = nn_util::wrap_dim(dim, x.dim(), "split");
  std::int64_t total = 0;
  for (std::int64_t s : sizes) {
    TFM_CHECK(s >= 0, "split", "negative size ", s);
    total += s;
  }
  TFM_CHECK(total == x.size(d), "split", "sizes add up to ", total, " but dim ", d, " of ", shape_str(x.shape()),
            " has size ", x.size(d));
  std::vector<Tensor> out;
  std::int64_t off = 0;
  for (std::int64_t s : sizes) {
    out.push_back(slice(x, d, off, off + s));  // slice records its own backward
    off += s;
  }
  return out;
}

}  // namespace tfm
