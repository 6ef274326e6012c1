// Activation ops over the SIMD kernels in src/kernels/activation.h. The backward recomputes
// f'(x) from the saved input, so only x is kept alive for it.
#include "tfm/ops/activation.h"

#include "kernels/activation.h"
#include "ops/broadcast.h"
#include "tfm/autograd.h"

namespace tfm {
namespace {

Tensor activation_op(const Tensor& x, kernels::Activation f) {
  const char* name = kernels::activation_name(f);
  ops_detail::check_f32(x, name);
  const Tensor xc = x.is_contiguous() ? x : x.clone();  // the kernels want one flat run
  Tensor out = Tensor::empty(x.shape());
  kernels::activation_forward(f, xc.data<float>(), out.data<float>(), out.numel());
  if (autograd::needs_grad({&x})) {
    autograd::record(name, out, [x, xc, f](const Tensor& g) {
      Tensor dx = Tensor::empty(x.shape());
      kernels::activation_backward(f, xc.data<float>(), g.data<float>(), dx.data<float>(), dx.numel());
      autograd::accumulate(x, dx);
    });
  }
  return out;
}

}  // namespace

Tensor relu(const Tensor& x) { return activation_op(x, kernels::Activation::relu); }
Tensor gelu(const Tensor& x, GeluApprox approximate) {
  return activation_op(x, approximate == GeluApprox::tanh ? kernels::Activation::gelu_tanh : kernels::Activation::gelu);
}
Tensor silu(const Tensor& x) { return activation_op(x, kernels::Activation::silu); }
Tensor quick_gelu(const Tensor& x) { return activation_op(x, kernels::Activation::quick_gelu); }
Tensor sigmoid(const Tensor& x) { return activation_op(x, kernels::Activation::sigmoid); }
Tensor tanh(const Tensor& x) { return activation_op(x, kernels::Activation::tanh); }
Tensor exp(const Tensor& x) { return activation_op(x, kernels::Activation::exp); }
Tensor log(const Tensor& x) { return activation_op(x, kernels::Activation::log); }

}  // namespace tfm
