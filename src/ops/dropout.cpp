// dropout: counter-based mask (kernels/dropout.h); the backward regenerates the same mask.
#include "kernels/dropout.h"
#include "ops/nn_util.h"
#include "tfm/autograd.h"
#include "tfm/ops/nn.h"
#include "tfm/ops/shape.h"

namespace tfm {
namespace {

// y = x with the mask, in the counter layout dropout() documents.
void apply_mask(const Tensor& x, float* y, float p, float scale, std::uint64_t seed, std::uint64_t offset,
                std::uint64_t row_stride) {
  if (row_stride == 0) {
    kernels::dropout_apply(x.data<float>(), y, x.numel(), p, scale, seed, offset);
    return;
  }
  const std::int64_t cols = x.dim() == 0 ? 1 : x.size(-1), rows = cols == 0 ? 0 : x.numel() / cols;
  for (std::int64_t r = 0; r < rows; ++r)
    kernels::dropout_apply(x.data<float>() + r * cols, y + r * cols, cols, p, scale, seed,
                           offset + static_cast<std::uint64_t>(r) * row_stride);
}

}  // namespace

Tensor dropout(const Tensor& x_in, float p, bool training, std::uint64_t seed, std::uint64_t offset,
               std::uint64_t row_stride) {
  nn_util::check_f32(x_in, "dropout", "input");
  TFM_CHECK(p >= 0.0f && p <= 1.0f, "dropout", "p must be in [0, 1], got ", p);
  if (!training || p == 0.0f) return x_in;
  // p == 1 drops everything; no survivor is scaled, so the scale's value does not matter.
  const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  const Tensor x = contiguous(x_in);  // element i = flat row-major index i of x
  Tensor out = Tensor::empty(x.shape());
  TFM_CHECK(row_stride == 0 || (x.dim() > 0 && static_cast<std::uint64_t>(x.size(-1)) <= row_stride), "dropout",
            "rows of ", x.dim() > 0 ? x.size(-1) : 1, " elements do not fit a row stride of ", row_stride);
  apply_mask(x, out.data<float>(), p, scale, seed, offset, row_stride);
  if (autograd::needs_grad({&x})) {
    autograd::record("dropout", out, [x, p, scale, seed, offset, row_stride](const Tensor& g) {
      Tensor dx = Tensor::empty(x.shape());
      apply_mask(g, dx.data<float>(), p, scale, seed, offset, row_stride);
      autograd::accumulate(x, dx);
    });
  }
  return out;
}

}  // namespace tfm
