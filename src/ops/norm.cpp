// layer_norm / rms_norm over the last dim, with backward for x, weight and bias.
#include "kernels/norm.h"
#include "ops/nn_util.h"
#include "tfm/autograd.h"
#include "tfm/ops/nn.h"
#include "tfm/ops/shape.h"

namespace tfm {
namespace {

// Checks a norm's optional (C) parameter and returns it contiguous (or undefined).
Tensor param(const Tensor& p, std::int64_t C, const char* op, const char* what) {
  if (!p.defined()) return p;
  nn_util::check_f32(p, op, what);
  TFM_CHECK(p.dim() == 1 && p.size(0) == C, op, what, " has shape ", shape_str(p.shape()), ", expected (", C, ")");
  return contiguous(p);
}

const float* ptr_or_null(const Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }

}  // namespace

Tensor layer_norm(const Tensor& x_in, const Tensor& weight, const Tensor& bias, float eps) {
  nn_util::check_f32(x_in, "layer_norm", "input");
  TFM_CHECK(x_in.dim() >= 1, "layer_norm", "input must have at least 1 dim, got ", shape_str(x_in.shape()));
  TFM_CHECK(eps >= 0.0f, "layer_norm", "eps must be >= 0, got ", eps);
  const std::int64_t C = x_in.size(-1);
  const Tensor w = param(weight, C, "layer_norm", "weight"), b = param(bias, C, "layer_norm", "bias");
  const Tensor x = contiguous(x_in);
  const std::int64_t rows = C ? x.numel() / C : 0;
  Tensor out = Tensor::empty(x.shape());
  Tensor mean = Tensor::empty({rows}), rstd = Tensor::empty({rows});  // per-row statistics
  kernels::layer_norm_forward(x.data<float>(), ptr_or_null(w), ptr_or_null(b), out.data<float>(),
                              mean.data<float>(), rstd.data<float>(), rows, C, eps);
  if (autograd::needs_grad({&x, &w, &b})) {
    autograd::record("layer_norm", out, [x, w, b, mean, rstd, rows, C](const Tensor& g) {
      Tensor dx, dw, db;
      if (x.requires_grad()) dx = Tensor::empty(x.shape());
      if (w.defined() && w.requires_grad()) dw = Tensor::empty({C});
      if (b.defined() && b.requires_grad()) db = Tensor::empty({C});
      kernels::layer_norm_backward(x.data<float>(), ptr_or_null(w), mean.data<float>(), rstd.data<float>(),
                                   g.data<float>(), dx.defined() ? dx.data<float>() : nullptr,
                                   dw.defined() ? dw.data<float>() : nullptr,
                                   db.defined() ? db.data<float>() : nullptr, rows, C);
      if (dx.defined()) autograd::accumulate(x, dx);
      if (dw.defined()) autograd::accumulate(w, dw);
      if (db.defined()) autograd::accumulate(b, db);
    });
  }
  return out;
}

Tensor rms_norm(const Tensor& x_in, const Tensor& weight, float eps) {
  nn_util::check_f32(x_in, "rms_norm", "input");
  TFM_CHECK(x_in.dim() >= 1, "rms_norm", "input must have at least 1 dim, got ", shape_str(x_in.shape()));
  TFM_CHECK(eps >= 0.0f, "rms_norm", "eps must be >= 0, got ", eps);
  const std::int64_t C = x_in.size(-1);
  const Tensor w = param(weight, C, "rms_norm", "weight");
  const Tensor x = contiguous(x_in);
  const std::int64_t rows = C ? x.numel() / C : 0;
  Tensor out = Tensor::empty(x.shape());
  Tensor rstd = Tensor::empty({rows});
  kernels::rms_norm_forward(x.data<float>(), ptr_or_null(w), out.data<float>(), rstd.data<float>(), rows, C, eps);
  if (autograd::needs_grad({&x, &w})) {
    autograd::record("rms_norm", out, [x, w, rstd, rows, C](const Tensor& g) {
      Tensor dx, dw;
      if (x.requires_grad()) dx = Tensor::empty(x.shape());
      if (w.defined() && w.requires_grad()) dw = Tensor::empty({C});
      kernels::rms_norm_backward(x.data<float>(), ptr_or_null(w), rstd.data<float>(), g.data<float>(),
                                 dx.defined() ? dx.data<float>() : nullptr, dw.defined() ? dw.data<float>() : nullptr,
                                 rows, C);
      if (dx.defined()) autograd::accumulate(x, dx);
      if (dw.defined()) autograd::accumulate(w, dw);
    });
  }
  return out;
}

}  // namespace tfm
