// cross_entropy: fused log-softmax + NLL (+ label smoothing) over the last dim. The forward
// keeps only logsumexp per row; the backward recomputes softmax from the logits in one pass.
#include <cmath>
#include <memory>

#include "kernels/softmax.h"
#include "ops/nn_util.h"
#include "tfm/autograd.h"
#include "tfm/ops/nn.h"
#include "tfm/ops/shape.h"

namespace tfm {

Tensor cross_entropy(const Tensor& logits, const Tensor& targets, std::int64_t ignore_index, float label_smoothing,
                     LossReduction reduction) {
  nn_util::check_f32(logits, "cross_entropy", "logits");
  TFM_CHECK(logits.dim() >= 1, "cross_entropy", "logits must have a class dim, got ", shape_str(logits.shape()));
  const Shape row_shape(logits.shape().begin(), logits.shape().end() - 1);  // (...)
  TFM_CHECK(targets.defined() && targets.shape() == row_shape, "cross_entropy", "targets ",
            targets.defined() ? shape_str(targets.shape()) : "undefined", " must have shape ", shape_str(row_shape),
            " for logits ", shape_str(logits.shape()));
  TFM_CHECK(label_smoothing >= 0.0f && label_smoothing <= 1.0f, "cross_entropy",
            "label_smoothing must be in [0, 1], got ", label_smoothing);
  const std::int64_t V = logits.size(-1);
  TFM_CHECK(V > 0, "cross_entropy", "logits ", shape_str(logits.shape()), " have no classes");
  auto tgt = std::make_shared<std::vector<std::int64_t>>(nn_util::index_values(targets, "cross_entropy", "targets"));
  const std::int64_t N = static_cast<std::int64_t>(tgt->size());
  std::int64_t valid = 0;
  for (std::int64_t i = 0; i < N; ++i) {
    const std::int64_t t = (*tgt)[static_cast<std::size_t>(i)];
    if (t == ignore_index) continue;
    TFM_CHECK(t >= 0 && t < V, "cross_entropy", "target ", t, " at position ", i, " ",
              nn_util::position_str(i, row_shape), " is out of range for ", V, " classes (ignore_index ",
              ignore_index, ")");
    ++valid;
  }
  const Tensor x = contiguous(logits);  // (N, V) row-major
  Tensor loss = Tensor::empty(row_shape), lse = Tensor::empty({N});
  kernels::cross_entropy_forward(x.data<float>(), tgt->data(), loss.data<float>(), lse.data<float>(), N, V,
                                 ignore_index, label_smoothing);
  Tensor out;
  if (reduction == LossReduction::none) {
    out = loss;
  } else {
    // One thread, fixed order, double accumulator: the total is thread-count invariant.
    double total = 0.0;
    const float* l = loss.data<float>();
    for (std::int64_t i = 0; i < N; ++i) total += l[i];
    if (reduction == LossReduction::mean) total /= static_cast<double>(valid);  // 0/0 = NaN, as PyTorch
    out = Tensor::from_floats({static_cast<float>(total)}, {});
  }
  if (autograd::needs_grad({&x})) {
    autograd::record("cross_entropy", out, [x, tgt, lse, N, V, valid, ignore_index, label_smoothing,
                                            reduction](const Tensor& g) {
      Tensor scale = Tensor::empty({N});  // d total / d loss[i]
      float* s = scale.data<float>();
      if (reduction == LossReduction::none) {
        const float* gv = g.data<float>();
        for (std::int64_t i = 0; i < N; ++i) s[i] = gv[i];
      } else {
        const float gs = g.item();
        const float v = reduction == LossReduction::mean ? gs / static_cast<float>(valid) : gs;
        for (std::int64_t i = 0; i < N; ++i) s[i] = v;
      }
      Tensor dx = Tensor::empty(x.shape());
      kernels::cross_entropy_backward(x.data<float>(), tgt->data(), lse.data<float>(), s, dx.data<float>(), N, V,
                                      ignore_index, label_smoothing);
      autograd::accumulate(x, dx);
    });
  }
  return out;
}

}  // namespace tfm
