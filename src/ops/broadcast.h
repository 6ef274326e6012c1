// Elementwise iteration over operands broadcast onto a contiguous output (ops-internal).
//
// plan_broadcast() aligns each operand's dims to the output's from the right, gives
// broadcast dims stride 0, drops size-1 dims and merges dims that are contiguous for every
// operand, so (B,T,C) + (C) becomes runs of C over B·T rows and two contiguous tensors
// become a single run. for_each_run() then hands out innermost runs (long runs cut into
// fixed pieces) across threads; every output element is written exactly once, so results
// do not depend on the thread count.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>

#include "kernels/parallel.h"
#include "tfm/tensor.h"

namespace tfm::ops_detail {

constexpr int kMaxOperands = 3;

struct BroadcastPlan {
  Shape shape;                                 // collapsed output shape, >= 1 dim
  std::array<Shape, kMaxOperands> strides;     // per operand, elements; 0 on broadcast dims
  std::int64_t numel = 0;
  std::int64_t inner_stride(int k) const { return strides[static_cast<std::size_t>(k)].back(); }
};

// Operands must broadcast to out_shape (checked by the caller with broadcast_shapes).
BroadcastPlan plan_broadcast(const Shape& out_shape, std::initializer_list<const Tensor*> operands);

// fn(out_offset, in_offsets, n): n consecutive output elements starting at out_offset;
// operand k's matching elements are at in_offsets[k] + i * plan.inner_stride(k).
template <class Fn>
void for_each_run(const BroadcastPlan& p, Fn&& fn) {
  if (p.numel == 0) return;
  constexpr std::int64_t kPiece = 1 << 14;  // long rows are split so one row can use all threads
  const std::size_t nd = p.shape.size();
  const std::int64_t inner = p.shape.back();
  const std::int64_t rows = p.numel / inner;
  const std::int64_t pieces = (inner + kPiece - 1) / kPiece;
  const std::int64_t run_len = inner < kPiece ? inner : kPiece;
  const std::int64_t grain = ((1 << 15) + run_len - 1) / run_len;
  kernels::parallel_for(rows * pieces, grain, [&](std::int64_t i0, std::int64_t i1) {
    for (std::int64_t it = i0; it < i1; ++it) {
      const std::int64_t row = it / pieces, piece = it % pieces;
      std::array<std::int64_t, kMaxOperands> off{};
      std::int64_t rem = row;
      for (std::size_t d = nd - 1; d-- > 0;) {  // outer dims, innermost first
        const std::int64_t i = rem % p.shape[d];
        rem /= p.shape[d];
        for (int k = 0; k < kMaxOperands; ++k) off[static_cast<std::size_t>(k)] += i * p.strides[static_cast<std::size_t>(k)][d];
      }
      const std::int64_t start = piece * kPiece;
      for (int k = 0; k < kMaxOperands; ++k) off[static_cast<std::size_t>(k)] += start * p.inner_stride(k);
      const std::int64_t n = inner - start < kPiece ? inner - start : kPiece;
      fn(row * inner + start, off.data(), n);
    }
  });
}

// Throws naming `op` unless x is f32.
void check_f32(const Tensor& x, const char* op);

}  // namespace tfm::ops_detail
