// quantize_acts (qgemm_act.h) vectorized once over Vec<Isa> / IVec<Isa>, built per ISA
// (qgemm_avx2.cpp, qgemm_blocks_avx512.cpp) and threaded over rows: the same values bit for bit
// as the scalar quantizer. amax is exact in any order (a max); x · (1/d) is one float multiply
// per element as there; the conversion rounds to nearest even, as std::nearbyint does in the
// default rounding mode. Why it matters: the scalar loop calls nearbyint per element and runs on
// one thread, a fifth of a 128-token prefill on AVX2 before.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/parallel.h"
#include "kernels/qgemm_act.h"
#include "kernels/simd/int_vec.h"

namespace tfm::kernels::qgemm_detail {

template <class Isa>
void quantize_act_rows(std::int64_t m0, std::int64_t m1, const float* x, std::int64_t ldx, QuantizedActs& a) {
  using V = simd::Vec<Isa>;
  using I = simd::IVec<Isa>;
  const std::int64_t K = a.K, block = a.block, nb = K / block;
  static_assert(32 % V::width == 0, "blocks of 32 fill whole vectors");
  for (std::int64_t m = m0; m < m1; ++m) {
    const float* xm = x + m * ldx;
    std::int8_t* q = a.q.data() + m * K;
    for (std::int64_t b = 0; b < nb; ++b) {
      const float* xb = xm + b * block;
      typename V::T amax = V::zero();
      for (std::int64_t j = 0; j < block; j += V::width) amax = V::max(V::abs(V::load(xb + j)), amax);
      const float d = V::reduce_max(amax) / 127.0f;
      const typename V::T id = V::set1(d != 0.0f ? 1.0f / d : 0.0f);
      a.d[static_cast<std::size_t>(m * nb + b)] = d;
      for (std::int64_t j = 0; j < block; j += V::width) I::store_i8(q + b * block + j, V::mul(V::load(xb + j), id));
    }
    block_sums(a, m);
  }
}

// quantize_acts's result for M rows, the rows split over the threads (tasks of >= 8K elements).
template <class Isa>
void quantize_acts_vec(DType wtype, std::int64_t M, std::int64_t K, const float* x, std::int64_t ldx,
                       QuantizedActs& a) {
  size_acts(wtype, M, K, a);
  if (a.block == 0) return;
  parallel_for(M, std::max<std::int64_t>(1, 8192 / std::max<std::int64_t>(K, 1)),
               [&](std::int64_t m0, std::int64_t m1) { quantize_act_rows<Isa>(m0, m1, x, ldx, a); });
}

}  // namespace tfm::kernels::qgemm_detail
