// Broadcast iteration plans (see broadcast.h).
#include "ops/broadcast.h"

#include "tfm/error.h"

namespace tfm::ops_detail {

BroadcastPlan plan_broadcast(const Shape& out_shape, std::initializer_list<const Tensor*> operands) {
  const std::size_t nd = out_shape.size();
  const std::size_t nk = operands.size();
  // Aligned strides per operand, dropping output dims of size 1.
  BroadcastPlan p;
  p.numel = shape_numel(out_shape);
  std::array<Shape, kMaxOperands> st;
  Shape shape;
  for (std::size_t i = 0; i < nd; ++i) {
    if (out_shape[i] == 1) continue;
    shape.push_back(out_shape[i]);
    std::size_t k = 0;
    for (const Tensor* t : operands) {
      const std::size_t td = t->shape().size();
      std::int64_t s = 0;
      if (i >= nd - td) {
        const std::size_t j = i - (nd - td);
        s = t->shape()[j] == 1 ? 0 : t->strides()[j];
      }
      st[k++].push_back(s);
    }
    for (; k < kMaxOperands; ++k) st[k].push_back(0);
  }
  if (shape.empty()) {
    shape.push_back(1);
    for (auto& s : st) s.push_back(0);
  }
  // Merge dim d into d+1 when every operand steps through both as one: s[d] == s[d+1]*n[d+1].
  p.shape.push_back(shape.back());
  for (auto& s : p.strides) s.clear();
  for (std::size_t k = 0; k < kMaxOperands; ++k) p.strides[k].push_back(st[k].back());
  for (std::size_t d = shape.size() - 1; d-- > 0;) {
    bool merge = true;
    for (std::size_t k = 0; k < nk; ++k)
      merge = merge && st[k][d] == p.strides[k].front() * p.shape.front();
    if (merge) {
      p.shape.front() *= shape[d];
    } else {
      p.shape.insert(p.shape.begin(), shape[d]);
      for (std::size_t k = 0; k < kMaxOperands; ++k) p.strides[k].insert(p.strides[k].begin(), st[k][d]);
    }
  }
  return p;
}

void check_f32(const Tensor& x, const char* op) {
  TFM_CHECK(x.defined(), op, "undefined tensor");
  TFM_CHECK(x.dtype() == DType::f32, op, "expects f32, got ", dtype_name(x.dtype()), " ", shape_str(x.shape()),
            " (cast() first)");
}

}  // namespace tfm::ops_detail
