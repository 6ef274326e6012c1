// dropout: counter-based mask (kernels/dropout.h); the backward regenerates the same mask.
#include "kernels/dropout.h"
#include "ops/nn_util.h"
#include "tfm/autograd.h"
#include "tfm/ops/nn.h"
#include "tfm/ops/shape.h"

namespace tfm {

Tensor dropout(const Tensor& x_in, float p, bool training, std::uint64_t seed, std::uint64_t offset) {
  nn_util::check_f32(x_in, "dropout", "input");
  TFM_CHECK(p >= 0.0f && p <= 1.0f, "dropout", "p must be in [0, 1], got ", p);
  if (!training || p == 0.0f) return x_in;
  // p == 1 drops everything; no survivor is scaled, so the scale's value does not matter.
  const float scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  const Tensor x = contiguous(x_in);  // element i = flat row-major index i of x
  Tensor out = Tensor::empty(x.shape());
  kernels::dropout_apply(x.data<float>(), out.data<float>(), x.numel(), p, scale, seed, offset);
  if (autograd::needs_grad({&x})) {
    autograd::record("dropout", out, [x, p, scale, seed, offset](const Tensor& g) {
      Tensor dx = Tensor::empty(x.shape());
      kernels::dropout_apply(g.data<float>(), dx.data<float>(), g.numel(), p, scale, seed, offset);
      autograd::accumulate(x, dx);
    });
  }
  return out;
}

}  // namespace tfm
