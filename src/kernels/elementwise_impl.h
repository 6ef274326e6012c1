// Template bodies of the elementwise kernels, written once over simd::Vec<Isa>. Included
// only by elementwise{,_avx2,_avx512}.cpp, each instantiating its own Isa.
#pragma once

#include "kernels/elementwise.h"
#include "kernels/simd/vec.h"

namespace tfm::kernels::impl {

template <class V, class Op, bool kAVec, bool kBVec>
void binary_loop(const float* a, const float* b, float* y, std::int64_t n, Op op) {
  // A stride-0 operand is loaded once as a broadcast register, outside the loop.
  const auto as = V::set1(*a), bs = V::set1(*b);
  std::int64_t i = 0;
  for (; i + V::width <= n; i += V::width) {
    const auto va = kAVec ? V::load(a + i) : as;
    const auto vb = kBVec ? V::load(b + i) : bs;
    V::store(y + i, op(va, vb));
  }
  if (i < n) {
    const int rest = static_cast<int>(n - i);
    const auto va = kAVec ? V::load_partial(a + i, rest, 1.0f) : as;  // fill 1: no 0/0 in the dead lanes
    const auto vb = kBVec ? V::load_partial(b + i, rest, 1.0f) : bs;
    V::store_partial(y + i, op(va, vb), rest);
  }
}

template <class V, class Op>
void binary_strided(const float* a, std::int64_t sa, const float* b, std::int64_t sb, float* y, std::int64_t n,
                    Op op) {
  if (sa && sb) binary_loop<V, Op, true, true>(a, b, y, n, op);
  else if (sa) binary_loop<V, Op, true, false>(a, b, y, n, op);
  else if (sb) binary_loop<V, Op, false, true>(a, b, y, n, op);
  else binary_loop<V, Op, false, false>(a, b, y, n, op);
}

template <class Isa>
void binary_run(BinaryOp op, const float* a, std::int64_t sa, const float* b, std::int64_t sb, float* y,
                std::int64_t n) {
  using V = simd::Vec<Isa>;
  using T = typename V::type;
  switch (op) {
    case BinaryOp::add: return binary_strided<V>(a, sa, b, sb, y, n, [](T u, T v) { return V::add(u, v); });
    case BinaryOp::sub: return binary_strided<V>(a, sa, b, sb, y, n, [](T u, T v) { return V::sub(u, v); });
    case BinaryOp::mul: return binary_strided<V>(a, sa, b, sb, y, n, [](T u, T v) { return V::mul(u, v); });
    case BinaryOp::div: return binary_strided<V>(a, sa, b, sb, y, n, [](T u, T v) { return V::div(u, v); });
  }
}

// y += alpha * x (the compiler may fuse the mul and add into an fma on FMA-capable builds).
template <class Isa>
void axpy_run(float alpha, const float* x, float* y, std::int64_t n) {
  using V = simd::Vec<Isa>;
  const auto va = V::set1(alpha);
  std::int64_t i = 0;
  for (; i + V::width <= n; i += V::width) V::store(y + i, V::add(V::load(y + i), V::mul(va, V::load(x + i))));
  if (i < n) {
    const int rest = static_cast<int>(n - i);
    V::store_partial(y + i, V::add(V::load_partial(y + i, rest), V::mul(va, V::load_partial(x + i, rest))), rest);
  }
}

}  // namespace tfm::kernels::impl
