// softmax / log_softmax: the last-dim kernels with their backward; other dims go through
// permute + contiguous (which carry their own backward).
#include <numeric>

#include "kernels/softmax.h"
#include "ops/nn_util.h"
#include "tfm/autograd.h"
#include "tfm/ops/nn.h"
#include "tfm/ops/shape.h"

namespace tfm {
namespace {

// x contiguous f32 (..., C): softmax over C.
Tensor softmax_last(const Tensor& x, bool log) {
  const std::int64_t cols = x.size(-1), rows = cols ? x.numel() / cols : 0;
  Tensor out = Tensor::empty(x.shape());
  (log ? kernels::log_softmax_forward : kernels::softmax_forward)(x.data<float>(), out.data<float>(), rows, cols);
  if (autograd::needs_grad({&x})) {
    // The backward needs only the output y (its handle, taken before record marks `out`).
    const Tensor y = out;
    autograd::record(log ? "log_softmax" : "softmax", out, [x, y, log, rows, cols](const Tensor& g) {
      Tensor dx = Tensor::empty(y.shape());
      (log ? kernels::log_softmax_backward : kernels::softmax_backward)(y.data<float>(), g.data<float>(),
                                                                       dx.data<float>(), rows, cols);
      autograd::accumulate(x, dx);
    });
  }
  return out;
}

Tensor softmax_dim(const Tensor& x, std::int64_t dim, bool log) {
  const char* op = log ? "log_softmax" : "softmax";
  nn_util::check_f32(x, op, "input");
  if (x.dim() == 0) return reshape(softmax_dim(reshape(x, {1}), dim, log), {});
  const std::int64_t d = nn_util::wrap_dim(dim, x.dim(), op);
  const std::int64_t last = x.dim() - 1;
  if (d == last) return softmax_last(contiguous(x), log);
  std::vector<std::int64_t> perm(static_cast<std::size_t>(x.dim()));
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[static_cast<std::size_t>(d)], perm[static_cast<std::size_t>(last)]);  // a swap is its own inverse
  return contiguous(permute(softmax_last(contiguous(permute(x, perm)), log), perm));
}

}  // namespace

Tensor softmax(const Tensor& x, std::int64_t dim) { return softmax_dim(x, dim, false); }
Tensor log_softmax(const Tensor& x, std::int64_t dim) { return softmax_dim(x, dim, true); }

}  // namespace tfm
