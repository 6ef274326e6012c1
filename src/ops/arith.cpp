// Broadcasting arithmetic, scalar forms, masked_fill / where, and the operators; each
// backward rule sits beside its forward.
#include "tfm/ops/arith.h"

#include "kernels/elementwise.h"
#include "ops/broadcast.h"
#include "tfm/autograd.h"
#include "tfm/error.h"
#include "tfm/ops/shape.h"

namespace tfm {
namespace {

using kernels::BinaryOp;
using ops_detail::check_f32;
using ops_detail::for_each_run;
using ops_detail::plan_broadcast;

// out = a op b over the broadcast shape; any strides. Runs whose inner strides are 0 or 1
// (every contiguous or broadcast operand) go to the SIMD kernel, others to the scalar loop.
Tensor binary_forward(BinaryOp op, const Tensor& a, const Tensor& b, const char* name) {
  check_f32(a, name);
  check_f32(b, name);
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), name);
  Tensor out = Tensor::empty(shape);
  const auto plan = plan_broadcast(shape, {&a, &b});
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* po = out.data<float>();
  const std::int64_t sa = plan.inner_stride(0), sb = plan.inner_stride(1);
  const auto fast = kernels::binary_run_kernel();
  const auto run = sa <= 1 && sb <= 1 ? fast : &kernels::naive::binary_run;
  for_each_run(plan, [&](std::int64_t o, const std::int64_t* off, std::int64_t n) {
    run(op, pa + off[0], sa, pb + off[1], sb, po + o, n);
  });
  return out;
}

Tensor scalar_tensor(float s) { return Tensor::full({}, s); }

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(BinaryOp::add, a, b, "add");
  if (autograd::needs_grad({&a, &b})) {
    autograd::record("add", out, [a, b](const Tensor& g) {
      if (a.requires_grad()) autograd::accumulate(a, sum_to_shape(g, a.shape()));
      if (b.requires_grad()) autograd::accumulate(b, sum_to_shape(g, b.shape()));
    });
  }
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(BinaryOp::sub, a, b, "sub");
  if (autograd::needs_grad({&a, &b})) {
    autograd::record("sub", out, [a, b](const Tensor& g) {
      if (a.requires_grad()) autograd::accumulate(a, sum_to_shape(g, a.shape()));
      if (b.requires_grad()) autograd::accumulate(b, neg(sum_to_shape(g, b.shape())));
    });
  }
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(BinaryOp::mul, a, b, "mul");
  if (autograd::needs_grad({&a, &b})) {
    autograd::record("mul", out, [a, b](const Tensor& g) {
      if (a.requires_grad()) autograd::accumulate(a, sum_to_shape(mul(g, b), a.shape()));
      if (b.requires_grad()) autograd::accumulate(b, sum_to_shape(mul(g, a), b.shape()));
    });
  }
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  Tensor out = binary_forward(BinaryOp::div, a, b, "div");
  if (autograd::needs_grad({&a, &b})) {
    autograd::record("div", out, [a, b](const Tensor& g) {
      if (a.requires_grad()) autograd::accumulate(a, sum_to_shape(div(g, b), a.shape()));
      // d(a/b)/db = -a / b^2, evaluated as PyTorch does: (-g·a) / (b·b).
      if (b.requires_grad()) autograd::accumulate(b, sum_to_shape(div(mul(neg(g), a), mul(b, b)), b.shape()));
    });
  }
  return out;
}

Tensor add_scalar(const Tensor& x, float s) {
  Tensor out = binary_forward(BinaryOp::add, x, scalar_tensor(s), "add_scalar");
  if (autograd::needs_grad({&x})) {
    autograd::record("add_scalar", out, [x](const Tensor& g) { autograd::accumulate(x, g); });
  }
  return out;
}

Tensor mul_scalar(const Tensor& x, float s) {
  Tensor out = binary_forward(BinaryOp::mul, x, scalar_tensor(s), "mul_scalar");
  if (autograd::needs_grad({&x})) {
    autograd::record("mul_scalar", out, [x, s](const Tensor& g) { autograd::accumulate(x, mul_scalar(g, s)); });
  }
  return out;
}

namespace {
Tensor div_scalar(const Tensor& x, float s) {
  Tensor out = binary_forward(BinaryOp::div, x, scalar_tensor(s), "div_scalar");
  if (autograd::needs_grad({&x})) {
    autograd::record("div_scalar", out, [x, s](const Tensor& g) { autograd::accumulate(x, div_scalar(g, s)); });
  }
  return out;
}
}  // namespace

Tensor neg(const Tensor& x) {
  Tensor out = binary_forward(BinaryOp::mul, x, scalar_tensor(-1.0f), "neg");
  if (autograd::needs_grad({&x})) {
    autograd::record("neg", out, [x](const Tensor& g) { autograd::accumulate(x, neg(g)); });
  }
  return out;
}

// ---- masking ------------------------------------------------------------------------------

Tensor masked_fill(const Tensor& x, const Tensor& mask, float value) {
  check_f32(x, "masked_fill");
  TFM_CHECK(mask.defined() && mask.dtype() == DType::u8, "masked_fill", "mask must be u8, got ",
            mask.defined() ? dtype_name(mask.dtype()) : "undefined");
  const Shape shape = broadcast_shapes(x.shape(), mask.shape(), "masked_fill");
  TFM_CHECK(shape == x.shape(), "masked_fill", "mask ", shape_str(mask.shape()), " must broadcast to x ",
            shape_str(x.shape()), ", not widen it to ", shape_str(shape));
  Tensor out = Tensor::empty(shape);
  const auto plan = plan_broadcast(shape, {&x, &mask});
  const float* px = x.data<float>();
  const std::uint8_t* pm = mask.data<std::uint8_t>();
  float* po = out.data<float>();
  const std::int64_t sx = plan.inner_stride(0), sm = plan.inner_stride(1);
  for_each_run(plan, [&](std::int64_t o, const std::int64_t* off, std::int64_t n) {
    const float* xr = px + off[0];
    const std::uint8_t* mr = pm + off[1];
    for (std::int64_t i = 0; i < n; ++i) po[o + i] = mr[i * sm] ? value : xr[i * sx];
  });
  if (autograd::needs_grad({&x})) {
    autograd::record("masked_fill", out, [x, mask](const Tensor& g) { autograd::accumulate(x, masked_fill(g, mask, 0.0f)); });
  }
  return out;
}

Tensor where(const Tensor& mask, const Tensor& a, const Tensor& b) {
  TFM_CHECK(mask.defined() && mask.dtype() == DType::u8, "where", "mask must be u8, got ",
            mask.defined() ? dtype_name(mask.dtype()) : "undefined");
  check_f32(a, "where");
  check_f32(b, "where");
  const Shape shape = broadcast_shapes(broadcast_shapes(mask.shape(), a.shape(), "where"), b.shape(), "where");
  Tensor out = Tensor::empty(shape);
  const auto plan = plan_broadcast(shape, {&mask, &a, &b});
  const std::uint8_t* pm = mask.data<std::uint8_t>();
  const float* pa = a.data<float>();
  const float* pb = b.data<float>();
  float* po = out.data<float>();
  const std::int64_t sm = plan.inner_stride(0), sa = plan.inner_stride(1), sb = plan.inner_stride(2);
  for_each_run(plan, [&](std::int64_t o, const std::int64_t* off, std::int64_t n) {
    const std::uint8_t* mr = pm + off[0];
    const float* ar = pa + off[1];
    const float* br = pb + off[2];
    for (std::int64_t i = 0; i < n; ++i) po[o + i] = mr[i * sm] ? ar[i * sa] : br[i * sb];
  });
  if (autograd::needs_grad({&a, &b})) {
    autograd::record("where", out, [mask, a, b](const Tensor& g) {
      const Tensor zero = scalar_tensor(0.0f);
      if (a.requires_grad()) autograd::accumulate(a, sum_to_shape(where(mask, g, zero), a.shape()));
      if (b.requires_grad()) autograd::accumulate(b, sum_to_shape(where(mask, zero, g), b.shape()));
    });
  }
  return out;
}

// ---- operators ----------------------------------------------------------------------------

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& x) { return neg(x); }
Tensor operator+(const Tensor& x, float s) { return add_scalar(x, s); }
Tensor operator+(float s, const Tensor& x) { return add_scalar(x, s); }
Tensor operator-(const Tensor& x, float s) { return add_scalar(x, -s); }
Tensor operator-(float s, const Tensor& x) { return add_scalar(neg(x), s); }
Tensor operator*(const Tensor& x, float s) { return mul_scalar(x, s); }
Tensor operator*(float s, const Tensor& x) { return mul_scalar(x, s); }
Tensor operator/(const Tensor& x, float s) { return div_scalar(x, s); }

}  // namespace tfm
