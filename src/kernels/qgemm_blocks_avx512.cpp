// Block-quantized weights (q8_0, q4_0, q4_k, q6_k) times int8 activations on AVX-512 VNNI,
// tiled so each weight block is decoded once per call and multiplied against every
// activation row: a register tile of up to kMR activation rows x kNR weight rows.
//
// Per tile of weight rows, with more activation rows than one register tile (prefill, batched
// decode; q4_k from 9 rows):
// 1. decode: each weight row is unpacked once into an L1/L2-sized buffer of ready-to-multiply
//    vectors (int8 weights, per-lane scales, integer offset terms);
// 2. multiply: for every group of kMR activation rows, a register tile runs over the buffer.
// With fewer rows (batch-1 decode) the tile decodes each block in registers where it is used.
// The floats of every output (m, n) go through the same operations in the same order whatever
// M is, whichever rows share its tile, buffered or not, and however N is split over threads;
// the integer lane sums are exact, so however they are formed they are the same integers. A
// row's result is bit-identical alone or in a batch (the contract of qgemm.h).
//
// Arithmetic, per format (the scalar twin, qgemm_twin.cpp, computes the same integer sums per
// block; the float terms here are that sum split over vector lanes, i.e. reordered):
// - q8_0: two 32-element blocks per 64-byte vector. vpdpbusd multiplies unsigned by signed
//   bytes: activations enter as x + 128 (u8) against the signed weights and each lane starts
//   from -128 Σ w over its four weights, computed once per weight vector. Every lane holds an
//   exact partial Σ x·w. One cvt, one multiply by (d_w · d_x) per lane and one FMA per 64
//   weights and activation row.
// - q4_0: four blocks per step, one per 128-bit lane (quads_tile): the raw nibbles (u8)
//   against x in a matching layout, each lane starting from -8 Σ x over its eight
//   activations; two vpdpbusd, one cvt, one multiply and one FMA per 128 weights.
// - q4_k: nibbles (unsigned) x activations (signed) by vpmaddubsw into 16-bit pairs, then
//   vpdpwssd with the 6-bit sub-block scales: an exact integer Σ sc·q·x per lane; the
//   sub-block minimums (dmin · m · Σx) go to a second accumulator, four blocks per vector.
// - q6_k: x + 128 against q - 32 (signed) as for q8_0, vpmaddubsw + vpdpwssd with the 8-bit
//   sub-block scales, each lane starting from -128 Σ sc·w.
// GCC 12 false positive inside avx512fintrin.h (see norm_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/qgemm_act_impl.h"
#include "kernels/qgemm_tile_shape.h"
#include "kernels/quant_blocks.h"
#include "tfm/error.h"

namespace tfm::kernels::qgemm_detail {
namespace {

constexpr int kMR = kTileRows;  // activation rows per register tile
constexpr int kNR = kTileCols;  // weight rows per register tile

float h2f(const unsigned char* p) {
  std::uint16_t v;
  std::memcpy(&v, p, 2);
  return _cvtsh_ss(v);
}
__m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
__m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
__m512i load512(const void* p) { return _mm512_loadu_si512(p); }
__m512i join(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }
std::int64_t round_up(std::int64_t n, std::int64_t m) { return (n + m - 1) / m * m; }

// -128 Σ w over each lane's four signed bytes: the term that turns Σ (x + 128)·w into Σ x·w.
__m512i minus_128_sum(__m512i w) {
  return _mm512_sub_epi32(_mm512_setzero_si512(),
                          _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(static_cast<char>(0x80)), w));
}

// ---------------------------------------------------------------- q8_0, q4_0: pairs of blocks
struct PairW {
  __m512i w;     // 64 weights: block 2p in bytes 0-31, block 2p + 1 in bytes 32-63 (q8_0 signed,
                 // q4_0 the unsigned nibbles)
  __m512i init;  // q8_0: -128 Σ w per lane (q4_0's lanes start from the activations' side)
  __m512 dw;     // lanes 0-7: scale of block 2p, lanes 8-15: of block 2p + 1
};

// Pair p (blocks 2p, 2p + 1) of a q8_0 weight row of nb blocks; an odd last block pairs with
// zeros.
[[gnu::always_inline]] inline PairW decode_pair(const unsigned char* row, std::int64_t p, std::int64_t nb) {
  constexpr std::size_t bytes = sizeof(BlockQ8_0);
  const unsigned char* b0 = row + 2 * p * static_cast<std::int64_t>(bytes);
  const bool two = 2 * p + 1 < nb;
  const __m512i w = join(load256(b0 + 2), two ? load256(b0 + bytes + 2) : _mm256_setzero_si256());
  std::uint16_t h0, h1 = 0;
  std::memcpy(&h0, b0, 2);
  if (two) std::memcpy(&h1, b0 + bytes, 2);
  const __m128 d01 = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(h0 | (std::uint32_t{h1} << 16))));
  const __m512i lanes = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  return {w, minus_128_sum(w), _mm512_permutexvar_ps(lanes, _mm512_castps128_ps512(d01))};
}

// src(n, p): pair p of the tile's weight row n (from the decoded buffer, or decoded on the
// spot). xu: the activations as x + 128; each lane starts from src's init.
template <int MR, int NR, class Src>
void pairs_tile(Src&& src, std::int64_t np, const std::uint8_t* const* xu, const float* const* dxv,
                float (&out)[kMR][kNR]) {
  __m512 acc[MR][NR];
  for (int m = 0; m < MR; ++m)
    for (int n = 0; n < NR; ++n) acc[m][n] = _mm512_setzero_ps();
  for (std::int64_t p = 0; p < np; ++p) {
    PairW wp[NR];
    for (int n = 0; n < NR; ++n) wp[n] = src(n, p);
    for (int m = 0; m < MR; ++m) {
      const __m512i x = load512(xu[m] + 64 * p);
      const __m512 dx = _mm512_loadu_ps(dxv[m] + 16 * p);
      for (int n = 0; n < NR; ++n) {
        // each lane: an exact partial Σ x·w
        const __m512i s = _mm512_dpbusd_epi32(wp[n].init, x, wp[n].w);
        acc[m][n] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(s), _mm512_mul_ps(wp[n].dw, dx), acc[m][n]);
      }
    }
  }
  for (int m = 0; m < MR; ++m)
    for (int n = 0; n < NR; ++n) out[m][n] = _mm512_reduce_add_ps(acc[m][n]);
}

// ---------------------------------------------------------------- q4_0: quads of blocks
// Four blocks (128 weights, 72 bytes) per step, each block in one 128-bit lane: one vector of
// the low nibbles (elements 0-15 of each block) and one of the high nibbles (16-31), so one
// and/shift/and pair unpacks 128 weights and nothing is shuffled. The activations are laid
// out to match once per call (prepare): per quad, 64 bytes of each block's elements 0-15, then
// 64 of 16-31, as signed int8 against the unsigned nibbles; each lane starts from -8 Σ x over
// its eight activations (the nibbles' offset), so two vpdpbusd give an exact Σ x·(q - 8) per
// lane, all of one block. Then one cvt, one multiply by d_w·d_x and one FMA per 128 weights.
struct QuadW {
  __m512i lo, hi;  // nibbles: lane i/4 holds block 4g + i/4
  __m512 dw;       // lanes 4i..4i+3: scale of block 4g + i
};

// Quad g of a q4_0 row from 72 bytes at b (four whole blocks).
[[gnu::always_inline]] inline QuadW decode_quad_at(const unsigned char* b) {
  constexpr std::int64_t bytes = sizeof(BlockQ4_0);
  const __m256i q01 = _mm256_inserti128_si256(_mm256_castsi128_si256(load128(b + 2)), load128(b + bytes + 2), 1);
  const __m256i q23 = _mm256_inserti128_si256(_mm256_castsi128_si256(load128(b + 2 * bytes + 2)), load128(b + 3 * bytes + 2), 1);
  const __m512i q = join(q01, q23), m4 = _mm512_set1_epi8(0x0F);
  std::uint16_t h[4];
  for (int i = 0; i < 4; ++i) std::memcpy(&h[i], b + i * bytes, 2);
  const std::uint64_t d4 = h[0] | std::uint64_t{h[1]} << 16 | std::uint64_t{h[2]} << 32 | std::uint64_t{h[3]} << 48;
  const __m128 d = _mm_cvtph_ps(_mm_cvtsi64_si128(static_cast<long long>(d4)));
  const __m512i lanes = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
  return {_mm512_and_si512(q, m4), _mm512_and_si512(_mm512_srli_epi16(q, 4), m4),
          _mm512_permutexvar_ps(lanes, _mm512_castps128_ps512(d))};
}

// Quad g of a row of nb blocks; a last quad of fewer blocks is padded with zero blocks (d = 0,
// nibbles 0, against zero activations), without reading past the row.
[[gnu::always_inline]] inline QuadW decode_quad(const unsigned char* row, std::int64_t g, std::int64_t nb) {
  constexpr std::int64_t bytes = sizeof(BlockQ4_0);
  const unsigned char* b = row + 4 * g * bytes;
  if (4 * g + 4 <= nb) [[likely]]
    return decode_quad_at(b);
  unsigned char tail[4 * bytes] = {};
  std::memcpy(tail, b, static_cast<std::size_t>((nb - 4 * g) * bytes));
  return decode_quad_at(tail);
}

// src(n, g): quad g of the tile's weight row n. xq: the activations in quad layout, xoff: -8 Σ x
// per lane, dxv: d_x per lane (prepare).
template <int MR, int NR, class Src>
void quads_tile(Src&& src, std::int64_t ng, const std::int8_t* const* xq, const std::int32_t* const* xoff,
                const float* const* dxv, float (&out)[kMR][kNR]) {
  // Two quads per step: t = c0·s0 (multiply), t = c1·s1 + t (FMA), acc += t (add). The chain
  // through acc is one add per 256 weights (one FMA per 128 was latency-bound at one weight row)
  // and a tile still needs one accumulator per output.
  __m512 acc[MR][NR];
  for (int m = 0; m < MR; ++m)
    for (int n = 0; n < NR; ++n) acc[m][n] = _mm512_setzero_ps();
  // Σ x·(q - 8) per lane of quad g against activation row m, as float, and its scales d_w·d_x
  auto dot = [&](const QuadW& w, int m, std::int64_t g) [[gnu::always_inline]] {
    const __m512i xl = load512(xq[m] + 128 * g), xh = load512(xq[m] + 128 * g + 64);
    return _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_dpbusd_epi32(load512(xoff[m] + 16 * g), w.lo, xl), w.hi, xh));
  };
  auto scales = [&](const QuadW& w, int m, std::int64_t g)
                    [[gnu::always_inline]] { return _mm512_mul_ps(w.dw, _mm512_loadu_ps(dxv[m] + 16 * g)); };
  std::int64_t g = 0;
  for (; g + 1 < ng; g += 2) {
    QuadW w0[NR], w1[NR];
    for (int n = 0; n < NR; ++n) {
      w0[n] = src(n, g);
      w1[n] = src(n, g + 1);
    }
    for (int m = 0; m < MR; ++m)
      for (int n = 0; n < NR; ++n) {
        const __m512 t = _mm512_mul_ps(dot(w0[n], m, g), scales(w0[n], m, g));
        acc[m][n] = _mm512_add_ps(acc[m][n], _mm512_fmadd_ps(dot(w1[n], m, g + 1), scales(w1[n], m, g + 1), t));
      }
  }
  if (g < ng) {
    QuadW w0[NR];
    for (int n = 0; n < NR; ++n) w0[n] = src(n, g);
    for (int m = 0; m < MR; ++m)
      for (int n = 0; n < NR; ++n)
        acc[m][n] = _mm512_add_ps(acc[m][n], _mm512_mul_ps(dot(w0[n], m, g), scales(w0[n], m, g)));
  }
  for (int m = 0; m < MR; ++m)
    for (int n = 0; n < NR; ++n) out[m][n] = _mm512_reduce_add_ps(acc[m][n]);
}

// ---------------------------------------------------------------- q4_k
// vpermd indices spreading the sub-block scales over chunk c's 32-bit lanes (each lane holds
// its scale twice, once per 16-bit half, for vpdpwssd): q4_k's 8 lanes per scale, q6_k's 4.
struct ScaleIdx {
  alignas(64) std::int32_t v[4][16];
};
constexpr ScaleIdx make_scale_idx(int lanes_per_scale) {
  ScaleIdx t{};
  for (int c = 0; c < 4; ++c)
    for (int i = 0; i < 16; ++i) t.v[c][i] = (16 / lanes_per_scale) * c + i / lanes_per_scale;
  return t;
}
constexpr ScaleIdx kQ4KIdx = make_scale_idx(8), kQ6KIdx = make_scale_idx(4);
const auto& kQ4KScaleIdx = kQ4KIdx.v;
const auto& kQ6ScaleIdx = kQ6KIdx.v;
// 32-bit lanes s -> s | s << 16 (the scale in both 16-bit halves; s fits 16 bits)
__m512i dup16(__m512i s32) { return _mm512_or_si512(_mm512_and_si512(s32, _mm512_set1_epi32(0xFFFF)), _mm512_slli_epi32(s32, 16)); }

struct Q4KW {
  __m512i u[4];   // chunk c: sub-block 2c's nibbles in bytes 0-31, 2c + 1's in bytes 32-63
  __m512i sc[4];  // 16-bit lanes 0-15: scale of sub-block 2c, lanes 16-31: of 2c + 1
  float d;
};

// The 6-bit scales (sc) and minimums (m) of a block, as 8 bytes each in the low half of a u64.
[[gnu::always_inline]] inline void k4_scales(const unsigned char* w, std::uint64_t& sc, std::uint64_t& m) {
  std::uint32_t s3[3];
  std::memcpy(s3, w + 4, 12);
  sc = (s3[0] & 0x3F3F3F3Fu) | std::uint64_t{(s3[2] & 0x0F0F0F0Fu) | ((s3[0] >> 2) & 0x30303030u)} << 32;
  m = (s3[1] & 0x3F3F3F3Fu) | std::uint64_t{((s3[2] >> 4) & 0x0F0F0F0Fu) | ((s3[1] >> 2) & 0x30303030u)} << 32;
}

[[gnu::always_inline]] inline Q4KW decode_q4_k(const unsigned char* row, std::int64_t b) {
  const unsigned char* w = row + b * static_cast<std::int64_t>(sizeof(BlockQ4_K));
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  std::uint64_t sc, mn;
  k4_scales(w, sc, mn);
  const __m512i S = dup16(_mm512_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(sc))));
  Q4KW o;
  for (int c = 0; c < 4; ++c) {
    const __m256i q = load256(w + 16 + 32 * c);
    o.u[c] = join(_mm256_and_si256(q, m4), _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
    o.sc[c] = _mm512_permutexvar_epi32(load512(kQ4KScaleIdx[c]), S);
  }
  o.d = h2f(w);
  return o;
}

// Views of one block for q4_k_tile: chunk c's nibbles and scales, and d. From the decoded
// buffer, or decoded chunk by chunk where it is used (few rows: keeps everything in registers).
struct Q4KBuffered {
  const Q4KW* b;
  __m512i u(int c) const { return b->u[c]; }
  __m512i sc(int c) const { return b->sc[c]; }
  float d() const { return b->d; }
};
struct Q4KStreamed {
  const unsigned char* w;
  __m512i S;
  [[gnu::always_inline]] Q4KStreamed(const unsigned char* row, std::int64_t b)
      : w(row + b * static_cast<std::int64_t>(sizeof(BlockQ4_K))) {
    std::uint64_t sc, mn;
    k4_scales(w, sc, mn);
    S = dup16(_mm512_cvtepu8_epi32(_mm_cvtsi64_si128(static_cast<long long>(sc))));
  }
  [[gnu::always_inline]] __m512i u(int c) const {
    const __m256i m4 = _mm256_set1_epi8(0x0F), q = load256(w + 16 + 32 * c);
    return join(_mm256_and_si256(q, m4), _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
  }
  [[gnu::always_inline]] __m512i sc(int c) const { return _mm512_permutexvar_epi32(load512(kQ4KScaleIdx[c]), S); }
  float d() const { return h2f(w); }
};

// The minimum pass's weight side: 8 minimums (int16) and dmin x 4 per block, zeros up to a
// multiple of 4 blocks.
void decode_q4_k_mins(const unsigned char* row, std::int64_t nb, std::int16_t* mins, float* dmin4) {
  for (std::int64_t b = 0; b < nb; ++b) {
    const unsigned char* w = row + b * static_cast<std::int64_t>(sizeof(BlockQ4_K));
    std::uint64_t sc, mn;
    k4_scales(w, sc, mn);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(mins + 8 * b), _mm_cvtepu8_epi16(_mm_cvtsi64_si128(static_cast<long long>(mn))));
    std::fill_n(dmin4 + 4 * b, 4, h2f(w + 2));
  }
  std::fill(mins + 8 * nb, mins + 8 * round_up(nb, 4), std::int16_t{0});
  std::fill(dmin4 + 4 * nb, dmin4 + 4 * round_up(nb, 4), 0.0f);
}

template <int MR, int NR, class Src>
void q4_k_tile(Src&& src, const std::int16_t* const* mins, const float* const* dmin4, std::int64_t nb,
               const QuantizedActs& a, std::int64_t m0, float (&out)[kMR][kNR]) {
  __m512 acc[MR][NR];
  for (int m = 0; m < MR; ++m)
    for (int n = 0; n < NR; ++n) acc[m][n] = _mm512_setzero_ps();
  for (std::int64_t b = 0; b < nb; ++b) {
    const auto wb0 = src(0, b);
    const auto wb1 = src(NR - 1, b);  // the same block when NR == 1
    auto wb = [&](int n) -> const auto& { return n == 0 ? wb0 : wb1; };
    __m512i isum[MR][NR];
    for (int m = 0; m < MR; ++m)
      for (int n = 0; n < NR; ++n) isum[m][n] = _mm512_setzero_si512();
    for (int c = 0; c < 4; ++c) {
      __m512i u[NR], sc[NR];
      for (int n = 0; n < NR; ++n) {
        u[n] = wb(n).u(c);
        sc[n] = wb(n).sc(c);
      }
      for (int m = 0; m < MR; ++m) {
        const __m512i x = load512(a.qrow(m0 + m) + 256 * b + 64 * c);
        for (int n = 0; n < NR; ++n) isum[m][n] = _mm512_dpwssd_epi32(isum[m][n], _mm512_maddubs_epi16(u[n], x), sc[n]);
      }
    }
    for (int m = 0; m < MR; ++m) {
      const float dx = a.drow(m0 + m)[b];
      for (int n = 0; n < NR; ++n)
        acc[m][n] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[m][n]), _mm512_set1_ps(wb(n).d() * dx), acc[m][n]);
    }
  }
  // minimums: Σ_s m[s] Σx over sub-block s, four blocks (32 sub-block sums) per vector
  __m512 accm[MR][NR];
  for (int m = 0; m < MR; ++m)
    for (int n = 0; n < NR; ++n) accm[m][n] = _mm512_setzero_ps();
  for (std::int64_t g = 0; g < round_up(nb, 4) / 4; ++g)
    for (int m = 0; m < MR; ++m) {
      const __m512i xs = load512(a.s32pad.data() + (m0 + m) * a.s32pad_stride + 32 * g);
      const __m512 dx = _mm512_loadu_ps(a.dx4.data() + (m0 + m) * a.dx4_stride + 16 * g);
      for (int n = 0; n < NR; ++n) {
        const __m512i mn = _mm512_madd_epi16(load512(mins[n] + 32 * g), xs);
        accm[m][n] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(mn), _mm512_mul_ps(_mm512_loadu_ps(dmin4[n] + 16 * g), dx),
                                     accm[m][n]);
      }
    }
  for (int m = 0; m < MR; ++m)
    for (int n = 0; n < NR; ++n) out[m][n] = _mm512_reduce_add_ps(acc[m][n]) - _mm512_reduce_add_ps(accm[m][n]);
}

// ---------------------------------------------------------------- q6_k
struct Q6KW {
  __m512i w[4];   // chunk c: elements 64c .. 64c + 63 as q - 32 (signed)
  __m512i sc[4];  // 16-bit lane i of chunk c: scale of sub-block 4c + i / 8
  __m512i init;   // -128 Σ sc·w per lane
  float d;
};

[[gnu::always_inline]] inline Q6KW decode_q6_k(const unsigned char* row, std::int64_t b) {
  const unsigned char* w = row + b * static_cast<std::int64_t>(sizeof(BlockQ6_K));
  const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
  const __m512i c32 = _mm512_set1_epi8(32), c80 = _mm512_set1_epi8(static_cast<char>(0x80));
  Q6KW o;
  for (int h = 0; h < 2; ++h) {
    const __m256i lo = load256(w + 64 * h), hi = load256(w + 64 * h + 32), qh = load256(w + 128 + 32 * h);
    const __m256i q1 = _mm256_or_si256(_mm256_and_si256(lo, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
    const __m256i q2 = _mm256_or_si256(_mm256_and_si256(hi, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
    const __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lo, 4), m4), _mm256_and_si256(qh, m30));
    const __m256i q4 =
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(hi, 4), m4), _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
    o.w[2 * h] = _mm512_sub_epi8(join(q1, q2), c32);
    o.w[2 * h + 1] = _mm512_sub_epi8(join(q3, q4), c32);
  }
  const __m512i S = dup16(_mm512_cvtepi8_epi32(load128(w + 192)));
  __m512i init = _mm512_setzero_si512();
  for (int c = 0; c < 4; ++c) {
    o.sc[c] = _mm512_permutexvar_epi32(load512(kQ6ScaleIdx[c]), S);
    init = _mm512_dpwssd_epi32(init, _mm512_maddubs_epi16(c80, o.w[c]), o.sc[c]);
  }
  o.init = _mm512_sub_epi32(_mm512_setzero_si512(), init);
  o.d = h2f(w + 208);
  return o;
}

template <int MR, int NR, class Src>
void q6_k_tile(Src&& src, std::int64_t nb, const QuantizedActs& a, std::int64_t m0, float (&out)[kMR][kNR]) {
  __m512 acc[MR][NR];
  for (int m = 0; m < MR; ++m)
    for (int n = 0; n < NR; ++n) acc[m][n] = _mm512_setzero_ps();
  for (std::int64_t b = 0; b < nb; ++b) {
    Q6KW wb[NR];
    for (int n = 0; n < NR; ++n) wb[n] = src(n, b);
    __m512i isum[MR][NR];
    for (int m = 0; m < MR; ++m)
      for (int n = 0; n < NR; ++n) isum[m][n] = wb[n].init;
    for (int c = 0; c < 4; ++c)
      for (int m = 0; m < MR; ++m) {
        const __m512i x = load512(a.xu.data() + (m0 + m) * a.xu_stride + 256 * b + 64 * c);
        for (int n = 0; n < NR; ++n)
          isum[m][n] = _mm512_dpwssd_epi32(isum[m][n], _mm512_maddubs_epi16(x, wb[n].w[c]), wb[n].sc[c]);
      }
    for (int m = 0; m < MR; ++m) {
      const float dx = a.drow(m0 + m)[b];
      for (int n = 0; n < NR; ++n)
        acc[m][n] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[m][n]), _mm512_set1_ps(wb[n].d * dx), acc[m][n]);
    }
  }
  for (int m = 0; m < MR; ++m)
    for (int n = 0; n < NR; ++n) out[m][n] = _mm512_reduce_add_ps(acc[m][n]);
}

// ---------------------------------------------------------------- driver

// The thread's buffers of decoded weight rows (one tile's worth), reused across calls.
template <class T>
T* scratch(std::vector<T>& v, std::size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

// Activation rows [m_lo, m_hi) of M against weight rows [n0, n1): every weight row pair is
// decoded, then the rows' register tiles run over it.
void block_rows_span(DType t, std::int64_t M, std::int64_t m_lo, std::int64_t m_hi, std::int64_t n0, std::int64_t n1,
                     std::int64_t K, const QuantizedActs& a, const void* w, std::size_t row_bytes, float* y,
                     std::int64_t ldy) {
  const auto* wbase = static_cast<const unsigned char*>(w);
  const std::int64_t nb = K / (t == DType::q8_0 || t == DType::q4_0 ? 32 : 256);
  // Decoded weights go through the buffer when several row groups reuse them; q4_k's decode is
  // cheap enough that two groups still run faster decoding twice in registers (measured, M = 8).
  const bool buffered = M > (t == DType::q4_k ? 2 * kMR : kMR);
  thread_local std::vector<PairW> pairs;
  thread_local std::vector<QuadW> quads;
  thread_local std::vector<Q4KW> q4k;
  thread_local std::vector<Q6KW> q6k;
  thread_local std::vector<float> dvals;
  thread_local std::vector<std::int16_t> mins;
  float out[kMR][kNR];
  // Weight rows per tile: kNR when the rows are buffered. Decoding in registers (few activation
  // rows), two rows at once read from memory well only while they are short: measured with
  // the weights in memory, two interleaved streams of rows >= 630 bytes (q8_0 / q6_k at
  // K = 768, q4_0 at K = 2048) ran 40-60% slower than one, while for 432-byte rows (q4_0 / q4_k
  // at K = 768) two hide the latency of one row's accumulator chain. Results do not depend on it.
  const std::int64_t n_step = buffered || row_bytes <= 512 ? kNR : 1;
  for (std::int64_t n = n0; n < n1; n += n_step) {
    const int nr = static_cast<int>(std::min<std::int64_t>(n_step, n1 - n));
    auto store = [&](std::int64_t m0, int mr) {
      for (int m = 0; m < mr; ++m)
        for (int j = 0; j < nr; ++j) y[(m0 + m) * ldy + n + j] = out[m][j];
    };
    const unsigned char* wr = wbase + static_cast<std::size_t>(n) * row_bytes;
    const unsigned char* wrow[kNR] = {wr, wr + row_bytes};
    if (t == DType::q8_0) {
      const std::int64_t np = (nb + 1) / 2;
      const PairW* wn[kNR] = {};
      if (buffered) {  // decode once into the buffer
        PairW* buf = scratch(pairs, static_cast<std::size_t>(kNR * np));
        for (int j = 0; j < nr; ++j) {
          for (std::int64_t p = 0; p < np; ++p) buf[j * np + p] = decode_pair(wrow[j], p, nb);
          wn[j] = buf + j * np;
        }
      }
      for (std::int64_t m0 = m_lo; m0 < m_hi; m0 += kMR) {
        const int mr = static_cast<int>(std::min<std::int64_t>(kMR, m_hi - m0));
        const std::uint8_t* xu[kMR];
        const float* dxv[kMR];
        for (int m = 0; m < mr; ++m) {
          xu[m] = a.xu.data() + (m0 + m) * a.xu_stride;
          dxv[m] = a.dxv.data() + (m0 + m) * a.dxv_stride;
        }
        if (buffered)
          with_tile(mr, nr, [&]<int MR, int NR>() {
            pairs_tile<MR, NR>([&](int j, std::int64_t p) { return wn[j][p]; }, np, xu, dxv, out);
          });
        else
          with_tile(mr, nr, [&]<int MR, int NR>() {
            pairs_tile<MR, NR>([&](int j, std::int64_t p) { return decode_pair(wrow[j], p, nb); }, np, xu, dxv, out);
          });
        store(m0, mr);
      }
    } else if (t == DType::q4_0) {
      const std::int64_t ng = (nb + 3) / 4;
      const QuadW* wn[kNR] = {};
      if (buffered) {
        QuadW* buf = scratch(quads, static_cast<std::size_t>(kNR * ng));
        for (int j = 0; j < nr; ++j) {
          for (std::int64_t g = 0; g < ng; ++g) buf[j * ng + g] = decode_quad(wrow[j], g, nb);
          wn[j] = buf + j * ng;
        }
      }
      for (std::int64_t m0 = m_lo; m0 < m_hi; m0 += kMR) {
        const int mr = static_cast<int>(std::min<std::int64_t>(kMR, m_hi - m0));
        const std::int8_t* xq[kMR];
        const std::int32_t* xoff[kMR];
        const float* dxv[kMR];
        for (int m = 0; m < mr; ++m) {
          xq[m] = reinterpret_cast<const std::int8_t*>(a.xu.data() + (m0 + m) * a.xu_stride);
          xoff[m] = a.xoff.data() + (m0 + m) * a.xoff_stride;
          dxv[m] = a.dxv.data() + (m0 + m) * a.dxv_stride;
        }
        if (buffered)
          with_tile(mr, nr, [&]<int MR, int NR>() {
            quads_tile<MR, NR>([&](int j, std::int64_t g) { return wn[j][g]; }, ng, xq, xoff, dxv, out);
          });
        else
          with_tile(mr, nr, [&]<int MR, int NR>() {
            quads_tile<MR, NR>([&](int j, std::int64_t g) { return decode_quad(wrow[j], g, nb); }, ng, xq, xoff, dxv,
                               out);
          });
        store(m0, mr);
      }
    } else if (t == DType::q4_k) {
      const std::int64_t nb4 = round_up(nb, 4);
      std::int16_t* mv = scratch(mins, static_cast<std::size_t>(kNR * 8 * nb4));
      float* dv = scratch(dvals, static_cast<std::size_t>(kNR * 4 * nb4));
      const std::int16_t* mn[kNR];
      const float* dmin4[kNR];
      for (int j = 0; j < nr; ++j) {
        decode_q4_k_mins(wrow[j], nb, mv + j * 8 * nb4, dv + j * 4 * nb4);
        mn[j] = mv + j * 8 * nb4;
        dmin4[j] = dv + j * 4 * nb4;
      }
      const Q4KW* wn[kNR] = {};
      if (buffered) {
        Q4KW* buf = scratch(q4k, static_cast<std::size_t>(kNR * nb));
        for (int j = 0; j < nr; ++j) {
          for (std::int64_t b = 0; b < nb; ++b) buf[j * nb + b] = decode_q4_k(wrow[j], b);
          wn[j] = buf + j * nb;
        }
      }
      for (std::int64_t m0 = m_lo; m0 < m_hi; m0 += kMR) {
        const int mr = static_cast<int>(std::min<std::int64_t>(kMR, m_hi - m0));
        if (buffered)
          with_tile(mr, nr, [&]<int MR, int NR>() {
            q4_k_tile<MR, NR>([&](int j, std::int64_t b) { return Q4KBuffered{&wn[j][b]}; }, mn, dmin4, nb, a, m0, out);
          });
        else
          with_tile(mr, nr, [&]<int MR, int NR>() {
            q4_k_tile<MR, NR>([&](int j, std::int64_t b) { return Q4KStreamed(wrow[j], b); }, mn, dmin4, nb, a, m0, out);
          });
        store(m0, mr);
      }
    } else {
      const Q6KW* wn[kNR] = {};
      if (buffered) {
        Q6KW* buf = scratch(q6k, static_cast<std::size_t>(kNR * nb));
        for (int j = 0; j < nr; ++j) {
          for (std::int64_t b = 0; b < nb; ++b) buf[j * nb + b] = decode_q6_k(wrow[j], b);
          wn[j] = buf + j * nb;
        }
      }
      for (std::int64_t m0 = m_lo; m0 < m_hi; m0 += kMR) {
        const int mr = static_cast<int>(std::min<std::int64_t>(kMR, m_hi - m0));
        if (buffered)
          with_tile(mr, nr, [&]<int MR, int NR>() {
            q6_k_tile<MR, NR>([&](int j, std::int64_t b) { return wn[j][b]; }, nb, a, m0, out);
          });
        else
          with_tile(mr, nr, [&]<int MR, int NR>() {
            q6_k_tile<MR, NR>([&](int j, std::int64_t b) { return decode_q6_k(wrow[j], b); }, nb, a, m0, out);
          });
        store(m0, mr);
      }
    }
  }
}

// Row blocks whose activations (about 1.5 bytes an element with their scales) fit this many
// bytes, a multiple of kMR rows: while every weight row pair of [n0, n1) passes over a block
// it stays in L2. Without blocks, a batch of 197-token pictures (6,304 rows) streamed all its
// activations from memory once per pair of weight rows and ran at half the per-row rate of one
// picture (docs/benchmarks.md). The tiles are those of the whole (the blocks start at
// multiples of kMR, and the decisions above read M), so results do not change.
constexpr std::int64_t kActBlockBytes = 384 * 1024;

void block_rows(DType t, std::int64_t M, std::int64_t n0, std::int64_t n1, std::int64_t K, const QuantizedActs& a,
                const void* w, std::size_t row_bytes, float* y, std::int64_t ldy) {
  const std::int64_t rows = std::max<std::int64_t>(kMR, kActBlockBytes / (K + K / 2) / kMR * kMR);
  for (std::int64_t m = 0; m < M; m += rows)
    block_rows_span(t, M, m, std::min(M, m + rows), n0, n1, K, a, w, row_bytes, y, ldy);
}

// The activation layouts the tiles read, derived once per call from the int8 blocks.
void prepare(DType t, std::int64_t M, std::int64_t K, const float* x, std::int64_t ldx, QuantizedActs& a) {
  quantize_acts_vec<simd::Avx512>(t, M, K, x, ldx, a);  // qgemm_act_impl.h
  if (t == DType::q8_0) {
    const std::int64_t nb = K / 32, np = (nb + 1) / 2;
    a.xu_stride = 64 * np;
    a.dxv_stride = 16 * np;
    a.xu.assign(static_cast<std::size_t>(M * a.xu_stride), 0x80);
    a.dxv.assign(static_cast<std::size_t>(M * a.dxv_stride), 0.0f);
    for (std::int64_t m = 0; m < M; ++m) {
      const std::int8_t* q = a.qrow(m);
      std::uint8_t* xu = a.xu.data() + m * a.xu_stride;
      for (std::int64_t k = 0; k < K; ++k) xu[k] = static_cast<std::uint8_t>(q[k] ^ 0x80);
      float* dxv = a.dxv.data() + m * a.dxv_stride;
      for (std::int64_t b = 0; b < nb; ++b) std::fill_n(dxv + 8 * b, 8, a.drow(m)[b]);
    }
  } else if (t == DType::q4_0) {
    // quads_tile's layout: per quad of blocks, elements 0-15 of its four blocks, then 16-31;
    // per lane -8 Σ x and d_x. Missing blocks of a last quad are zeros.
    const std::int64_t nb = K / 32, ng = (nb + 3) / 4;
    a.xu_stride = 128 * ng;
    a.xoff_stride = 16 * ng;
    a.dxv_stride = 16 * ng;
    a.xu.assign(static_cast<std::size_t>(M * a.xu_stride), 0);
    a.xoff.assign(static_cast<std::size_t>(M * a.xoff_stride), 0);
    a.dxv.assign(static_cast<std::size_t>(M * a.dxv_stride), 0.0f);
    for (std::int64_t m = 0; m < M; ++m) {
      const std::int8_t* q = a.qrow(m);
      auto* xq = reinterpret_cast<std::int8_t*>(a.xu.data() + m * a.xu_stride);
      std::int32_t* off = a.xoff.data() + m * a.xoff_stride;
      float* dxv = a.dxv.data() + m * a.dxv_stride;
      for (std::int64_t b = 0; b < nb; ++b) {
        const std::int64_t g = b / 4, i = b % 4;
        std::memcpy(xq + 128 * g + 16 * i, q + 32 * b, 16);
        std::memcpy(xq + 128 * g + 64 + 16 * i, q + 32 * b + 16, 16);
        for (int l = 0; l < 4; ++l) {
          int s = 0;
          for (int j = 0; j < 4; ++j) s += q[32 * b + 4 * l + j] + q[32 * b + 16 + 4 * l + j];
          off[16 * g + 4 * i + l] = -8 * s;
          dxv[16 * g + 4 * i + l] = a.drow(m)[b];
        }
      }
    }
  } else if (t == DType::q4_k) {
    const std::int64_t nb = K / 256, nb4 = round_up(nb, 4);
    a.s32pad_stride = 8 * nb4;
    a.dx4_stride = 4 * nb4;
    a.s32pad.assign(static_cast<std::size_t>(M * a.s32pad_stride), 0);
    a.dx4.assign(static_cast<std::size_t>(M * a.dx4_stride), 0.0f);
    for (std::int64_t m = 0; m < M; ++m) {
      std::copy_n(a.s32row(m), 8 * nb, a.s32pad.data() + m * a.s32pad_stride);
      for (std::int64_t b = 0; b < nb; ++b) std::fill_n(a.dx4.data() + m * a.dx4_stride + 4 * b, 4, a.drow(m)[b]);
    }
  } else if (t == DType::q6_k) {
    a.xu_stride = K;
    a.xu.resize(static_cast<std::size_t>(M * K));
    for (std::size_t i = 0; i < a.xu.size(); ++i) a.xu[i] = static_cast<std::uint8_t>(a.q[i] ^ 0x80);
  }
}

}  // namespace

const BlockRowsFn block_rows_avx512_vnni = &block_rows;
const PrepareActsFn prepare_acts_avx512_vnni = &prepare;

}  // namespace tfm::kernels::qgemm_detail
