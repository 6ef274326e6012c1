// The x16 kernels (layout and reasons in quant_repack.h), written once over the vector types
// and built per ISA (qgemm_repacked_avx2.cpp, qgemm_repacked_avx512.cpp): one output row per
// 32-bit lane, 16 rows per group (one AVX-512 vector, two AVX2 vectors), so a block of the group
// is contiguous and needs no shuffle, gather or horizontal sum.
//
// Per block, activation row and vector of rows: byte dots of the lanes' weights against four
// activations broadcast give each lane the exact integer Σ x·w of its row's block (q4_0: the
// nibbles unsigned, the lanes starting from -8 Σ x, their offset, the same for every weight row;
// q8_0: signed weights), then one convert and one FMA by d_w·d_x into the lane's accumulator.
// The integers are exact on every ISA and the float steps after them are the same, so the ISA
// builds agree bit for bit, and output (m, n) follows the same sequence for any M or split over
// threads (a row's result is bit-identical in a batch).
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/quant_repack.h"
#include "kernels/simd/int_vec.h"

namespace tfm::kernels::qgemm_detail {

constexpr std::int64_t kQ4x16BlockBytes = 288;  // 16 fp16 scales + 16 x 16 nibble bytes
constexpr std::int64_t kQ8x16BlockBytes = 544;  // 16 fp16 scales + 16 x 32 int8 weights

template <class Isa, int MR>
void q4_0x16_group_rows(const unsigned char* wg, std::int64_t nb, const QuantizedActs& a, std::int64_t m0, float* y,
                        std::int64_t ldy) {
  using V = simd::Vec<Isa>;
  using I = simd::IVec<Isa>;
  constexpr int W = V::width, C = static_cast<int>(kX16Rows) / W;  // vectors of rows per group
  typename V::T acc[MR][C];
  for (int m = 0; m < MR; ++m)
    for (int c = 0; c < C; ++c) acc[m][c] = V::zero();
  for (std::int64_t b = 0; b < nb; ++b) {
    const unsigned char* blk = wg + b * kQ4x16BlockBytes;
    for (int c = 0; c < C; ++c) {
      const typename V::T dw = I::load_f16(blk + 2 * W * c);
      // u[i]: elements 4i..4i+3 (low nibbles, i < 4) or 16+4(i-4).. (high nibbles) of each row
      typename I::T u[8];
      for (int i = 0; i < 4; ++i) {
        const typename I::T v = I::load(blk + 32 + 64 * i + 4 * W * c);
        u[i] = I::low_nibbles(v);
        u[4 + i] = I::high_nibbles(v);
      }
      for (int m = 0; m < MR; ++m) {
        const std::int8_t* x = a.qrow(m0 + m) + 32 * b;
        typename I::T s[8];
        for (int i = 0; i < 4; ++i) {
          s[i] = I::bcast4(x + 4 * i);
          s[4 + i] = I::bcast4(x + 16 + 4 * i);
        }
        const typename I::T sum = I::template dot_sum<8, 15>(I::set1_i32(-8 * a.s32row(m0 + m)[b]), u, s);
        const typename V::T scale = V::mul(dw, V::set1(a.drow(m0 + m)[b]));
        acc[m][c] = V::fma(I::to_float(sum), scale, acc[m][c]);
      }
    }
  }
  for (int m = 0; m < MR; ++m)
    for (int c = 0; c < C; ++c) V::store(y + (m0 + m) * ldy + W * c, acc[m][c]);
}

template <class Isa, int MR>
void q8_0x16_group_rows(const unsigned char* wg, std::int64_t nb, const QuantizedActs& a, std::int64_t m0, float* y,
                        std::int64_t ldy) {
  using V = simd::Vec<Isa>;
  using I = simd::IVec<Isa>;
  constexpr int W = V::width, C = static_cast<int>(kX16Rows) / W;
  typename V::T acc[MR][C];
  for (int m = 0; m < MR; ++m)
    for (int c = 0; c < C; ++c) acc[m][c] = V::zero();
  for (std::int64_t b = 0; b < nb; ++b) {
    const unsigned char* blk = wg + b * kQ8x16BlockBytes;
    for (int c = 0; c < C; ++c) {
      const typename V::T dw = I::load_f16(blk + 2 * W * c);
      for (int m = 0; m < MR; ++m) {
        const std::int8_t* x = a.qrow(m0 + m) + 32 * b;
        // two chains of four signed dots (elements 0-15, 16-31), joined
        typename I::T s0 = I::set1_i32(0), s1 = I::set1_i32(0);
        for (int i = 0; i < 4; ++i) {
          s0 = I::dot_s8(s0, I::load(blk + 32 + 64 * i + 4 * W * c), I::bcast4(x + 4 * i));
          s1 = I::dot_s8(s1, I::load(blk + 32 + 64 * (4 + i) + 4 * W * c), I::bcast4(x + 16 + 4 * i));
        }
        const typename V::T scale = V::mul(dw, V::set1(a.drow(m0 + m)[b]));
        acc[m][c] = V::fma(I::to_float(I::add(s0, s1)), scale, acc[m][c]);
      }
    }
  }
  for (int m = 0; m < MR; ++m)
    for (int c = 0; c < C; ++c) V::store(y + (m0 + m) * ldy + W * c, acc[m][c]);
}

// Groups [g0, g1) for all M activation rows, up to kMR rows per pass over a group (the weights
// decoded once for all of them); rows(mr) runs the group kernel instantiated for mr rows.
template <int kMR, class Rows>
void x16_groups(std::int64_t M, std::int64_t g0, std::int64_t g1, std::int64_t K, std::int64_t group_block,
                const void* w, float* y, Rows&& rows) {
  static_assert(kMR >= 1 && kMR <= 4);
  const std::int64_t nb = K / 32;
  for (std::int64_t g = g0; g < g1; ++g) {
    const unsigned char* wg = static_cast<const unsigned char*>(w) + static_cast<std::size_t>(g * nb * group_block);
    float* yg = y + g * kX16Rows;
    for (std::int64_t m0 = 0; m0 < M; m0 += kMR) {
      switch (std::min<std::int64_t>(kMR, M - m0)) {
        case 4: if constexpr (kMR >= 4) rows.template operator()<4>(wg, nb, m0, yg); break;
        case 3: if constexpr (kMR >= 3) rows.template operator()<3>(wg, nb, m0, yg); break;
        case 2: if constexpr (kMR >= 2) rows.template operator()<2>(wg, nb, m0, yg); break;
        default: rows.template operator()<1>(wg, nb, m0, yg); break;
      }
    }
  }
}

template <class Isa, int kMR>
void q4_0x16_groups(std::int64_t M, std::int64_t g0, std::int64_t g1, std::int64_t K, const QuantizedActs& a,
                    const void* w, float* y, std::int64_t ldy) {
  x16_groups<kMR>(M, g0, g1, K, kQ4x16BlockBytes, w, y,
                  [&]<int MR>(const unsigned char* wg, std::int64_t nb, std::int64_t m0, float* yg) {
                    q4_0x16_group_rows<Isa, MR>(wg, nb, a, m0, yg, ldy);
                  });
}

template <class Isa, int kMR>
void q8_0x16_groups(std::int64_t M, std::int64_t g0, std::int64_t g1, std::int64_t K, const QuantizedActs& a,
                    const void* w, float* y, std::int64_t ldy) {
  x16_groups<kMR>(M, g0, g1, K, kQ8x16BlockBytes, w, y,
                  [&]<int MR>(const unsigned char* wg, std::int64_t nb, std::int64_t m0, float* yg) {
                    q8_0x16_group_rows<Isa, MR>(wg, nb, a, m0, yg, ldy);
                  });
}

}  // namespace tfm::kernels::qgemm_detail
