// Scalar-function maps (sqrt, rsqrt, pow, abs): one libm call or a few flops per element,
// written as plain loops over broadcast runs (any input strides), with their backward rules.
#include <cmath>

#include "ops/broadcast.h"
#include "tfm/autograd.h"
#include "tfm/ops/arith.h"

namespace tfm {
namespace {

// out[i] = f(x[i]) for x of any strides; contiguous f32 out.
template <class F>
Tensor map_unary(const Tensor& x, const char* name, F f) {
  ops_detail::check_f32(x, name);
  Tensor out = Tensor::empty(x.shape());
  const auto plan = ops_detail::plan_broadcast(x.shape(), {&x});
  const float* px = x.data<float>();
  float* po = out.data<float>();
  const std::int64_t sx = plan.inner_stride(0);
  ops_detail::for_each_run(plan, [&](std::int64_t o, const std::int64_t* off, std::int64_t n) {
    const float* xr = px + off[0];
    for (std::int64_t i = 0; i < n; ++i) po[o + i] = f(xr[i * sx]);
  });
  return out;
}

// gx = g * f'(x) elementwise (g contiguous, x any strides).
template <class D>
Tensor grad_map(const Tensor& x, const Tensor& g, D dfdx) {
  const Tensor xc = x.is_contiguous() ? x : x.clone();
  Tensor gx = Tensor::empty(x.shape());
  const float* px = xc.data<float>();
  const float* pg = g.data<float>();
  float* po = gx.data<float>();
  kernels::parallel_for(gx.numel(), 1 << 15, [&](std::int64_t s, std::int64_t e) {
    for (std::int64_t i = s; i < e; ++i) po[i] = pg[i] * dfdx(px[i]);
  });
  return gx;
}

}  // namespace

Tensor sqrt(const Tensor& x) {
  Tensor out = map_unary(x, "sqrt", [](float v) { return std::sqrt(v); });
  if (autograd::needs_grad({&x})) {
    autograd::record("sqrt", out, [x](const Tensor& g) {
      autograd::accumulate(x, grad_map(x, g, [](float v) { return 0.5f / std::sqrt(v); }));
    });
  }
  return out;
}

Tensor rsqrt(const Tensor& x) {
  Tensor out = map_unary(x, "rsqrt", [](float v) { return 1.0f / std::sqrt(v); });
  if (autograd::needs_grad({&x})) {
    autograd::record("rsqrt", out, [x](const Tensor& g) {  // d/dx x^-1/2 = -x^-3/2 / 2
      autograd::accumulate(x, grad_map(x, g, [](float v) {
        const float r = 1.0f / std::sqrt(v);
        return -0.5f * r * r * r;
      }));
    });
  }
  return out;
}

Tensor pow(const Tensor& x, float p) {
  // Exact products for the common small integer powers, as PyTorch does.
  Tensor out = map_unary(x, "pow", [p](float v) {
    if (p == 2.0f) return v * v;
    if (p == 3.0f) return v * v * v;
    if (p == 1.0f) return v;
    if (p == 0.5f) return std::sqrt(v);
    return std::pow(v, p);
  });
  if (autograd::needs_grad({&x})) {
    autograd::record("pow", out, [x, p](const Tensor& g) {
      autograd::accumulate(x, grad_map(x, g, [p](float v) {
        if (p == 0.0f) return 0.0f;
        if (p == 2.0f) return 2.0f * v;
        return p * std::pow(v, p - 1.0f);
      }));
    });
  }
  return out;
}

Tensor abs(const Tensor& x) {
  Tensor out = map_unary(x, "abs", [](float v) { return std::fabs(v); });
  if (autograd::needs_grad({&x})) {
    autograd::record("abs", out, [x](const Tensor& g) {
      autograd::accumulate(x, grad_map(x, g, [](float v) { return v > 0.0f ? 1.0f : (v < 0.0f ? -1.0f : 0.0f); }));
    });
  }
  return out;
}

}  // namespace tfm
