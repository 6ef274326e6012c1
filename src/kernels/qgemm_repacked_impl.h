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
constexpr std::int64_t kQ4Kx16BlockBytes = 2304;  // d, dmin (32 bytes each), 3 + 32 vectors of 64
constexpr std::int64_t kQ6Kx16BlockBytes = 3360;  // d (32 bytes), 4 + 32 + 16 vectors of 64

// A group kernel's accumulators: MR activation rows x the group's 16 output rows (C vectors of
// lanes each), zeroed, then stored as MR rows of 16 outputs.
template <class Isa, int MR>
struct GroupTile {
  using V = simd::Vec<Isa>;
  static constexpr int C = static_cast<int>(kX16Rows) / V::width;
  typename V::T acc[MR][C];
  GroupTile() {
    for (int m = 0; m < MR; ++m)
      for (int c = 0; c < C; ++c) acc[m][c] = V::zero();
  }
  void store(float* y, std::int64_t ldy) const {
    for (int m = 0; m < MR; ++m)
      for (int c = 0; c < C; ++c) V::store(y + m * ldy + V::width * c, acc[m][c]);
  }
};

template <class Isa, int MR>
void q4_0x16_group_rows(const unsigned char* wg, std::int64_t nb, const QuantizedActs& a, std::int64_t m0, float* y,
                        std::int64_t ldy) {
  using V = simd::Vec<Isa>;
  using I = simd::IVec<Isa>;
  constexpr int W = V::width, C = static_cast<int>(kX16Rows) / W;  // vectors of rows per group
  GroupTile<Isa, MR> tile;
  auto& acc = tile.acc;
  for (std::int64_t b = 0; b < nb; ++b) {
    const unsigned char* blk = wg + b * kQ4x16BlockBytes;
    if (a.prefetch_weights)
      for (int l = 0; l < 5; ++l) __builtin_prefetch(blk + 8 * kQ4x16BlockBytes + 64 * l);  // 2.3 KB ahead
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
  tile.store(y + m0 * ldy, ldy);
}

template <class Isa, int MR>
void q8_0x16_group_rows(const unsigned char* wg, std::int64_t nb, const QuantizedActs& a, std::int64_t m0, float* y,
                        std::int64_t ldy) {
  using V = simd::Vec<Isa>;
  using I = simd::IVec<Isa>;
  constexpr int W = V::width, C = static_cast<int>(kX16Rows) / W;
  GroupTile<Isa, MR> tile;
  auto& acc = tile.acc;
  for (std::int64_t b = 0; b < nb; ++b) {
    const unsigned char* blk = wg + b * kQ8x16BlockBytes;
    if (a.prefetch_weights)
      for (int l = 0; l < 9; ++l) __builtin_prefetch(blk + 4 * kQ8x16BlockBytes + 64 * l);  // 2.2 KB ahead
    for (int c = 0; c < C; ++c) {
      const typename V::T dw = I::load_f16(blk + 2 * W * c);
      if constexpr (I::kUnsignedDot) {
        // vpdpbusd multiplies unsigned by signed bytes without saturating: (x + 128)·w in one
        // instruction per 4 bytes, less 128·Σw, computed once for all MR rows. The same exact
        // integers as the signed dots below.
        typename I::T w[8], ones[8];
        for (int i = 0; i < 8; ++i) w[i] = I::load(blk + 32 + 64 * i + 4 * W * c), ones[i] = I::set1_i32(0x01010101);
        const typename I::T bias = I::template shl<7>(I::template dot_sum<8, 1>(I::set1_i32(0), ones, w));
        for (int m = 0; m < MR; ++m) {
          const std::int8_t* x = a.qrow(m0 + m) + 32 * b;
          typename I::T xu[8];
          for (int i = 0; i < 8; ++i) xu[i] = I::bcast4_biased(x + 4 * i);
          const typename I::T s = I::sub(I::template dot_sum<8, 255>(I::set1_i32(0), xu, w), bias);
          const typename V::T scale = V::mul(dw, V::set1(a.drow(m0 + m)[b]));
          acc[m][c] = V::fma(I::to_float(s), scale, acc[m][c]);
        }
        continue;
      }
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
  tile.store(y + m0 * ldy, ldy);
}

// The k-quant kernels walk a group block (2304 or 3360 bytes) once, front to back (each 64-byte
// vector used whole before the next), and prefetch the next block as they go. What mattered was
// the prefetch: q6_k read 7.9-8.2 GB/s from memory walking the block once per vector of lanes,
// 8.6-9.2 walking it once, 17.8-18.8 with the prefetch, against ~25 from cache (tfm bench
// qgemm, Zen 3, 1 thread).

// q4_k, 16 rows per group block of 256 elements: per lane, sub-block j's exact Σ nibble·x times
// its 6-bit scale (in the vpmaddwd that widens the pair sums), Σ_j min_j · Σ x over sub-block j
// from the activations' sums of 32, then the float steps of the scalar twin in its order
// (qgemm_twin.cpp: (d·dx)·isc - (dmin·dx)·imin, added to the accumulator; no FMA), so each
// output is the twin's to the bit.
template <class Isa, int MR>
void q4_kx16_group_rows(const unsigned char* wg, std::int64_t nb, const QuantizedActs& a, std::int64_t m0, float* y,
                        std::int64_t ldy) {
  using V = simd::Vec<Isa>;
  using I = simd::IVec<Isa>;
  using IT = typename I::T;
  constexpr int W = V::width, C = static_cast<int>(kX16Rows) / W;
  GroupTile<Isa, MR> tile;
  auto& acc = tile.acc;
  const IT six = I::set1_i32(0x3F3F3F3F), low4 = I::set1_i32(0x0F0F0F0F), top2 = I::set1_i32(0x30303030);
  for (std::int64_t b = 0; b < nb; ++b) {
    const unsigned char* blk = wg + b * kQ4Kx16BlockBytes;
    // The 12 packed bytes as three words per lane, unpacked as the plain row kernel does into
    // scales 0-3 and 4-7 and mins 0-3 and 4-7, one byte each; the 8 scales as vpmaddwd operands.
    IT sc[C][8], mn4[C][2];
    for (int c = 0; c < C; ++c) {
      const int lane = 4 * W * c;  // this vector's lanes within each 64-byte vector
      const IT w0 = I::load(blk + 64 + lane), w1 = I::load(blk + 128 + lane), w2 = I::load(blk + 192 + lane);
      const IT sc4[2] = {I::and_(w0, six), I::or_(I::and_(w2, low4), I::and_(I::template shr<2>(w0), top2))};
      mn4[c][0] = I::and_(w1, six);
      mn4[c][1] = I::or_(I::and_(I::template shr<4>(w2), low4), I::and_(I::template shr<2>(w1), top2));
      for (int j = 0; j < 8; ++j) sc[c][j] = I::scale_operand(I::template byte_i32<false>(sc4[j / 4], j % 4));
    }
    IT isc[MR][C];
    for (int m = 0; m < MR; ++m)
      for (int c = 0; c < C; ++c) isc[m][c] = I::set1_i32(0);
    for (int p = 0; p < 4; ++p)      // sub-blocks 2p (low nibbles) and 2p + 1 (high), 32 bytes of each row
      for (int h = 0; h < 2; ++h) {  // bytes 16h..16h+15 of the 32: vectors 8p + 4h + k
        const int chunk = 2 * p + h;  // 8 chunks: the next block's 36 lines, 5 each
        if (a.prefetch_weights)
          for (int l = 0; l < 5; ++l) __builtin_prefetch(blk + kQ4Kx16BlockBytes + 64 * (5 * chunk + l));
        for (int c = 0; c < C; ++c) {
          IT lo[4], hi[4];
          for (int k = 0; k < 4; ++k) {
            const IT v = I::load(blk + 256 + 64 * (8 * p + 4 * h + k) + 4 * W * c);
            lo[k] = I::low_nibbles(v);
            hi[k] = I::high_nibbles(v);
          }
          for (int m = 0; m < MR; ++m) {
            const std::int8_t* x = a.qrow(m0 + m) + 256 * b + 64 * p + 16 * h;
            IT xl[4], xh[4];
            for (int k = 0; k < 4; ++k) {
              xl[k] = I::bcast4(x + 4 * k);
              xh[k] = I::bcast4(x + 32 + 4 * k);
            }
            isc[m][c] = I::template dot_sum_scaled<4, 15>(isc[m][c], lo, xl, sc[c][2 * p]);
            isc[m][c] = I::template dot_sum_scaled<4, 15>(isc[m][c], hi, xh, sc[c][2 * p + 1]);
          }
        }
      }
    for (int c = 0; c < C; ++c) {
      // mins as int16 pairs (0, 2) and (1, 3) of each word, against the pairs of sums of 32
      const IT mn[4] = {I::template bytes_i16<false, false>(mn4[c][0]), I::template bytes_i16<false, true>(mn4[c][0]),
                        I::template bytes_i16<false, false>(mn4[c][1]), I::template bytes_i16<false, true>(mn4[c][1])};
      const typename V::T dw = I::load_f16(blk + 2 * W * c), dmin = I::load_f16(blk + 32 + 2 * W * c);
      for (int m = 0; m < MR; ++m) {
        const std::int16_t* s = a.s32row(m0 + m) + 8 * b;
        IT imin = I::madd16(mn[0], I::pair16(s[0], s[2]));
        imin = I::add(imin, I::madd16(mn[1], I::pair16(s[1], s[3])));
        imin = I::add(imin, I::madd16(mn[2], I::pair16(s[4], s[6])));
        imin = I::add(imin, I::madd16(mn[3], I::pair16(s[5], s[7])));
        const typename V::T dx = V::set1(a.drow(m0 + m)[b]);
        acc[m][c] = V::add(acc[m][c], V::sub(V::mul(V::mul(dw, dx), I::to_float(isc[m][c])),
                                             V::mul(V::mul(dmin, dx), I::to_float(imin))));
      }
    }
  }
  tile.store(y + m0 * ldy, ldy);
}

// q6_k, 16 rows per group block of 256 elements: the 6-bit levels rebuilt from ql and qh as the
// plain row kernel does, Σ_s scale_s · (Σ q·x - 32 Σ x) over the 16 sub-blocks of 16 exactly in
// int32, then the twin's (d·dx)·isum added (no FMA): each output is the twin's to the bit.
template <class Isa, int MR>
void q6_kx16_group_rows(const unsigned char* wg, std::int64_t nb, const QuantizedActs& a, std::int64_t m0, float* y,
                        std::int64_t ldy) {
  using V = simd::Vec<Isa>;
  using I = simd::IVec<Isa>;
  using IT = typename I::T;
  constexpr int W = V::width, C = static_cast<int>(kX16Rows) / W;
  GroupTile<Isa, MR> tile;
  auto& acc = tile.acc;
  const IT low4 = I::set1_i32(0x0F0F0F0F), bits45 = I::set1_i32(0x30303030);
  for (std::int64_t b = 0; b < nb; ++b) {
    const unsigned char* blk = wg + b * kQ6Kx16BlockBytes;
    IT sc[C][16];  // the int8 scales as vpmaddwd operands
    for (int c = 0; c < C; ++c)
      for (int k = 0; k < 4; ++k) {
        const IT v = I::load(blk + 32 + 64 * k + 4 * W * c);  // scales 4k..4k+3 of each row
        for (int j = 0; j < 4; ++j) sc[c][4 * k + j] = I::scale_operand(I::template byte_i32<true>(v, j));
      }
    IT isum[MR][C];
    for (int m = 0; m < MR; ++m)
      for (int c = 0; c < C; ++c) isum[m][c] = I::set1_i32(0);
    // Plain layout: for half h and byte l < 32, ql[64h + l] holds elements 128h + l (low
    // nibble) and 128h + 64 + l (high), ql[64h + 32 + l] elements 128h + 32 + l and 128h + 96 + l,
    // and qh[32h + l] their top two bits (bits 0-1, 4-5 and 2-3, 6-7).
    for (int h = 0; h < 2; ++h)
      for (int half = 0; half < 2; ++half)  // ql[64h + 32 half ..]: elements 128h + 32 half + ..
        for (int g = 0; g < 2; ++g) {       // bytes 16g..16g+15 of those 32: sub-blocks s1, s1 + 4
          const int s1 = 8 * h + 2 * half + g;
          const int chunk = 4 * h + 2 * half + g;  // 8 chunks: the next block's 53 lines, 7 each
          // Always: this walk jumps between the block's three regions, which the hardware
          // prefetchers do not follow (7.3 GB/s without, 19-23 with, on a Zen 4 as on a Zen 3).
          for (int l = 0; l < 7; ++l) __builtin_prefetch(blk + kQ6Kx16BlockBytes + 64 * (7 * chunk + l));
          for (int c = 0; c < C; ++c) {
            IT lo[4], hi[4];
            for (int k = 0; k < 4; ++k) {
              const IT q = I::load(blk + 288 + 64 * (16 * h + 8 * half + 4 * g + k) + 4 * W * c);
              const IT qh = I::load(blk + 2336 + 64 * (8 * h + 4 * g + k) + 4 * W * c);
              const IT top_lo = half ? I::template shl<2>(qh) : I::template shl<4>(qh);
              const IT top_hi = half ? I::template shr<2>(qh) : qh;
              lo[k] = I::or_(I::and_(q, low4), I::and_(top_lo, bits45));
              hi[k] = I::or_(I::and_(I::template shr<4>(q), low4), I::and_(top_hi, bits45));
            }
            for (int m = 0; m < MR; ++m) {
              const std::int8_t* x = a.qrow(m0 + m) + 256 * b + 128 * h + 32 * half + 16 * g;
              IT xl[4], xh[4];
              for (int k = 0; k < 4; ++k) {
                xl[k] = I::bcast4(x + 4 * k);
                xh[k] = I::bcast4(x + 64 + 4 * k);
              }
              isum[m][c] = I::template dot_sum_scaled<4, 63>(isum[m][c], lo, xl, sc[c][s1]);
              isum[m][c] = I::template dot_sum_scaled<4, 63>(isum[m][c], hi, xh, sc[c][s1 + 4]);
            }
          }
        }
    for (int c = 0; c < C; ++c) {
      // the levels are q - 32: Σ_s scale_s · 32 Σ x over s, by int16 pairs of scales and sums of 16
      IT sp[8];
      for (int k = 0; k < 4; ++k) {
        const IT v = I::load(blk + 32 + 64 * k + 4 * W * c);
        sp[2 * k] = I::template bytes_i16<true, false>(v);
        sp[2 * k + 1] = I::template bytes_i16<true, true>(v);
      }
      const typename V::T dw = I::load_f16(blk + 2 * W * c);
      for (int m = 0; m < MR; ++m) {
        const std::int16_t* s = a.s16row(m0 + m) + 16 * b;
        IT off = I::set1_i32(0);
        for (int k = 0; k < 4; ++k) {
          off = I::add(off, I::madd16(sp[2 * k], I::pair16(s[4 * k], s[4 * k + 2])));
          off = I::add(off, I::madd16(sp[2 * k + 1], I::pair16(s[4 * k + 1], s[4 * k + 3])));
        }
        const IT total = I::sub(isum[m][c], I::template shl<5>(off));
        acc[m][c] = V::add(acc[m][c], V::mul(V::mul(dw, V::set1(a.drow(m0 + m)[b])), I::to_float(total)));
      }
    }
  }
  tile.store(y + m0 * ldy, ldy);
}

// Each x16 type's group kernel with its block geometry, for x16_groups.
template <class Isa> struct Q4_0x16 {
  static constexpr std::int64_t kElems = 32, kBytes = kQ4x16BlockBytes;
  template <int MR> static constexpr auto rows = &q4_0x16_group_rows<Isa, MR>;
};
template <class Isa> struct Q8_0x16 {
  static constexpr std::int64_t kElems = 32, kBytes = kQ8x16BlockBytes;
  template <int MR> static constexpr auto rows = &q8_0x16_group_rows<Isa, MR>;
};
template <class Isa> struct Q4_Kx16 {
  static constexpr std::int64_t kElems = 256, kBytes = kQ4Kx16BlockBytes;
  template <int MR> static constexpr auto rows = &q4_kx16_group_rows<Isa, MR>;
};
template <class Isa> struct Q6_Kx16 {
  static constexpr std::int64_t kElems = 256, kBytes = kQ6Kx16BlockBytes;
  template <int MR> static constexpr auto rows = &q6_kx16_group_rows<Isa, MR>;
};

// Groups [g0, g1) for all M activation rows (an X16Fn), up to kMR rows per pass over a group
// (the weights decoded once for all of them).
template <class Type, int kMR>
void x16_groups(std::int64_t M, std::int64_t g0, std::int64_t g1, std::int64_t K, const QuantizedActs& a,
                const void* w, float* y, std::int64_t ldy) {
  static_assert(kMR >= 1 && kMR <= 4);
  const std::int64_t nb = K / Type::kElems;
  for (std::int64_t g = g0; g < g1; ++g) {
    const unsigned char* wg = static_cast<const unsigned char*>(w) + static_cast<std::size_t>(g * nb * Type::kBytes);
    float* yg = y + g * kX16Rows;
    for (std::int64_t m0 = 0; m0 < M; m0 += kMR) {
      switch (std::min<std::int64_t>(kMR, M - m0)) {
        case 4: if constexpr (kMR >= 4) Type::template rows<4>(wg, nb, a, m0, yg, ldy); break;
        case 3: if constexpr (kMR >= 3) Type::template rows<3>(wg, nb, a, m0, yg, ldy); break;
        case 2: if constexpr (kMR >= 2) Type::template rows<2>(wg, nb, a, m0, yg, ldy); break;
        default: Type::template rows<1>(wg, nb, a, m0, yg, ldy); break;
      }
    }
  }
}

}  // namespace tfm::kernels::qgemm_detail
