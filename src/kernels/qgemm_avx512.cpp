// Compact-weight kernels for AVX-512 with VNNI (vpdpbusd: 64 u8 x s8 products summed into 16
// int32 lanes per instruction) — compiled with -mavx512vnni (src/CMakeLists.txt) and only
// picked when cpuid reports AVX512_VNNI (qgemm.cpp). The arithmetic is the scalar twin's
// (qgemm_twin.cpp): integer dot per block, one float multiply-add per block, with the lanes of
// a block's partial sums converted and accumulated separately (float reordering only).
//
// Rows of activations are taken up to 4 at a time so each weight block is decoded once for
// all of them; every row runs the same instruction sequence whatever the group size, so a
// row's result does not depend on M (batch invariance).
// GCC 12 false positive inside avx512fintrin.h (see norm_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <cstring>

#include "kernels/qgemm_act.h"
#include "kernels/quant_blocks.h"
#include "tfm/error.h"

namespace tfm::kernels::qgemm_detail {
namespace {

float h2f(const unsigned char* p) {
  std::uint16_t v;
  std::memcpy(&v, p, 2);
  return _cvtsh_ss(v);
}
__m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
__m512i load512(const void* p) { return _mm512_loadu_si512(p); }
__m512i join(__m256i lo, __m256i hi) { return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1); }

struct RowPtrs {
  const std::int8_t* q[4];
  const float* d[4];
  const std::int16_t* s[4];  // sum32 (q4_0, q4_k) or bsum16 (q6_k)
  const float* x[4];
};

// The block loop of the 32-element formats: step(b, acc) adds block b of every row into acc;
// blocks alternate between two accumulator sets (FMA latency), summed once per row at the end.
template <int R, class Step>
void alternating_blocks(std::int64_t nb, Step&& step, float* out) {
  __m256 acc0[R], acc1[R];
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm256_setzero_ps();
  std::int64_t b = 0;
  for (; b + 2 <= nb; b += 2) {
    step(b, acc0);
    step(b + 1, acc1);
  }
  if (b < nb) step(b, acc0);
  for (int r = 0; r < R; ++r) out[r] = _mm512_reduce_add_ps(_mm512_zextps256_ps512(_mm256_add_ps(acc0[r], acc1[r])));
}

template <int R>
void q8_0_rows(const unsigned char* w, std::int64_t K, const RowPtrs& a, float* out) {
  auto step = [&](std::int64_t b, __m256* acc) {
    const unsigned char* wb = w + b * static_cast<std::int64_t>(sizeof(BlockQ8_0));
    const __m256i wq = load256(wb + 2);
    const __m256i aw = _mm256_abs_epi8(wq);
    const float dw = h2f(wb);
    for (int r = 0; r < R; ++r) {
      const __m256i sx = _mm256_sign_epi8(load256(a.q[r] + 32 * b), wq);  // sign moved onto x
      const __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), aw, sx);
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * a.d[r][b]), acc[r]);
    }
  };
  alternating_blocks<R>(K / 32, step, out);
}

template <int R>
void q4_0_rows(const unsigned char* w, std::int64_t K, const RowPtrs& a, float* out) {
  const __m128i m4 = _mm_set1_epi8(0x0F);
  auto step = [&](std::int64_t b, __m256* acc) {
    const unsigned char* wb = w + b * static_cast<std::int64_t>(sizeof(BlockQ4_0));
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb + 2));
    const __m256i u = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m4), _mm_and_si128(q, m4));
    const float dw = h2f(wb);
    for (int r = 0; r < R; ++r) {
      // lane 0 starts at -8 Σx: the nibbles' offset, folded into the integer sum
      const __m256i p = _mm256_dpbusd_epi32(_mm256_zextsi128_si256(_mm_cvtsi32_si128(-8 * a.s[r][b])), u,
                                            load256(a.q[r] + 32 * b));
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * a.d[r][b]), acc[r]);
    }
  };
  alternating_blocks<R>(K / 32, step, out);
}

template <int R>
void q4_k_rows(const unsigned char* w, std::int64_t K, const RowPtrs& a, float* out) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  // chunk c holds sub-blocks 2c (lanes 0-7) and 2c + 1 (lanes 8-15)
  const __m512i idx[4] = {_mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0),
                          _mm512_set_epi32(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2),
                          _mm512_set_epi32(5, 5, 5, 5, 5, 5, 5, 5, 4, 4, 4, 4, 4, 4, 4, 4),
                          _mm512_set_epi32(7, 7, 7, 7, 7, 7, 7, 7, 6, 6, 6, 6, 6, 6, 6, 6)};
  __m512 acc[R];
  __m128 accm[R];
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm512_setzero_ps();
    accm[r] = _mm_setzero_ps();
  }
  for (std::int64_t b = 0; b < K / 256; ++b, w += sizeof(BlockQ4_K)) {
    std::uint32_t s3[3];
    std::memcpy(s3, w + 4, 12);
    const std::uint32_t sc_lo = s3[0] & 0x3F3F3F3Fu, m_lo = s3[1] & 0x3F3F3F3Fu;
    const std::uint32_t sc_hi = (s3[2] & 0x0F0F0F0Fu) | ((s3[0] >> 2) & 0x30303030u);
    const std::uint32_t m_hi = ((s3[2] >> 4) & 0x0F0F0F0Fu) | ((s3[1] >> 2) & 0x30303030u);
    const __m512i S = _mm512_cvtepu8_epi32(_mm_set_epi32(0, 0, static_cast<int>(sc_hi), static_cast<int>(sc_lo)));
    const __m128i M16 = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, static_cast<int>(m_hi), static_cast<int>(m_lo)));
    __m512i u[4], sc[4];
    for (int c = 0; c < 4; ++c) {
      const __m256i q = load256(w + 16 + 32 * c);
      u[c] = join(_mm256_and_si256(q, m4), _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
      sc[c] = _mm512_permutexvar_epi32(idx[c], S);
    }
    const float d = h2f(w), dmin = h2f(w + 2);
    for (int r = 0; r < R; ++r) {
      const std::int8_t* x = a.q[r] + 256 * b;
      __m512i isum = _mm512_setzero_si512();
      for (int c = 0; c < 4; ++c) {
        const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[c], load512(x + 64 * c));
        isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(p, sc[c]));
      }
      const __m128i mins = _mm_madd_epi16(M16, _mm_loadu_si128(reinterpret_cast<const __m128i*>(a.s[r] + 8 * b)));
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(d * a.d[r][b]), acc[r]);
      accm[r] = _mm_fmadd_ps(_mm_cvtepi32_ps(mins), _mm_set1_ps(dmin * a.d[r][b]), accm[r]);
    }
  }
  for (int r = 0; r < R; ++r)
    out[r] = _mm512_reduce_add_ps(acc[r]) - _mm512_reduce_add_ps(_mm512_zextps128_ps512(accm[r]));
}

template <int R>
void q6_k_rows(const unsigned char* w, std::int64_t K, const RowPtrs& a, float* out) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
  // chunk c holds elements 64c .. 64c + 63: lane i belongs to sub-block 4c + i / 4
  const __m512i idx[4] = {_mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0),
                          _mm512_set_epi32(7, 7, 7, 7, 6, 6, 6, 6, 5, 5, 5, 5, 4, 4, 4, 4),
                          _mm512_set_epi32(11, 11, 11, 11, 10, 10, 10, 10, 9, 9, 9, 9, 8, 8, 8, 8),
                          _mm512_set_epi32(15, 15, 15, 15, 14, 14, 14, 14, 13, 13, 13, 13, 12, 12, 12, 12)};
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (std::int64_t b = 0; b < K / 256; ++b, w += sizeof(BlockQ6_K)) {
    const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + 192));
    const __m512i S = _mm512_cvtepi8_epi32(sc8);
    const __m256i S16 = _mm256_cvtepi8_epi16(sc8);
    __m512i u[4], sc[4];
    for (int h = 0; h < 2; ++h) {
      const __m256i lo = load256(w + 64 * h), hi = load256(w + 64 * h + 32), qh = load256(w + 128 + 32 * h);
      const __m256i q1 = _mm256_or_si256(_mm256_and_si256(lo, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
      const __m256i q2 = _mm256_or_si256(_mm256_and_si256(hi, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
      const __m256i q3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lo, 4), m4), _mm256_and_si256(qh, m30));
      const __m256i q4 =
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(hi, 4), m4), _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
      u[2 * h] = join(q1, q2);
      u[2 * h + 1] = join(q3, q4);
    }
    for (int c = 0; c < 4; ++c) sc[c] = _mm512_permutexvar_epi32(idx[c], S);
    const float d = h2f(w + 208);
    for (int r = 0; r < R; ++r) {
      const std::int8_t* x = a.q[r] + 256 * b;
      __m512i isum = _mm512_setzero_si512();
      for (int c = 0; c < 4; ++c) {
        const __m512i p = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[c], load512(x + 64 * c));
        isum = _mm512_add_epi32(isum, _mm512_mullo_epi32(p, sc[c]));
      }
      // the 6-bit levels are q - 32: subtract 32 Σ_s sc[s] Σx over sub-block s
      const __m256i off = _mm256_madd_epi16(S16, load256(a.s[r] + 16 * b));
      isum = _mm512_sub_epi32(isum, _mm512_zextsi256_si512(_mm256_slli_epi32(off, 5)));
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_set1_ps(d * a.d[r][b]), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) out[r] = _mm512_reduce_add_ps(acc[r]);
}

// bf16 / f16 weights widened to f32 in registers (a shift / vcvtph2ps), f32 FMAs with the
// unquantized activations; two accumulators per row alternate over 16-wide chunks.
template <int R, bool kBf16>
void half_rows(const unsigned char* w, std::int64_t K, const RowPtrs& a, float* out) {
  __m512 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  std::int64_t k = 0;
  int parity = 0;
  auto widen = [](__m256i h) {
    if constexpr (kBf16) return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    else return _mm512_cvtph_ps(h);
  };
  for (; k + 32 <= K; k += 32) {  // two chunks, one per accumulator (kept in registers)
    const __m512 w0 = widen(load256(w + 2 * k)), w1 = widen(load256(w + 2 * k + 32));
    for (int r = 0; r < R; ++r) {
      acc[r][0] = _mm512_fmadd_ps(w0, _mm512_loadu_ps(a.x[r] + k), acc[r][0]);
      acc[r][1] = _mm512_fmadd_ps(w1, _mm512_loadu_ps(a.x[r] + k + 16), acc[r][1]);
    }
  }
  if (k + 16 <= K) {
    const __m512 wf = widen(load256(w + 2 * k));
    for (int r = 0; r < R; ++r) acc[r][0] = _mm512_fmadd_ps(wf, _mm512_loadu_ps(a.x[r] + k), acc[r][0]);
    k += 16;
    parity = 1;
  }
  if (k < K) {  // the last partial chunk, masked
    const __mmask16 mask = static_cast<__mmask16>((1u << (K - k)) - 1);
    const __m512 wf = widen(_mm256_maskz_loadu_epi16(mask, w + 2 * k));
    for (int r = 0; r < R; ++r)
      if (parity) acc[r][1] = _mm512_fmadd_ps(wf, _mm512_maskz_loadu_ps(mask, a.x[r] + k), acc[r][1]);
      else acc[r][0] = _mm512_fmadd_ps(wf, _mm512_maskz_loadu_ps(mask, a.x[r] + k), acc[r][0]);
  }
  for (int r = 0; r < R; ++r) out[r] = _mm512_reduce_add_ps(_mm512_add_ps(acc[r][0], acc[r][1]));
}

template <int R>
void dispatch_rows(DType t, const unsigned char* w, std::int64_t K, const RowPtrs& a, float* out) {
  switch (t) {
    case DType::q8_0: return q8_0_rows<R>(w, K, a, out);
    case DType::q4_0: return q4_0_rows<R>(w, K, a, out);
    case DType::q4_k: return q4_k_rows<R>(w, K, a, out);
    case DType::q6_k: return q6_k_rows<R>(w, K, a, out);
    case DType::bf16: return half_rows<R, true>(w, K, a, out);
    case DType::f16: return half_rows<R, false>(w, K, a, out);
    default: fail("qgemm", "weights of type ", dtype_name(t), " have no integer kernel");
  }
}

void rows(DType wtype, std::int64_t M, std::int64_t n0, std::int64_t n1, std::int64_t K, const float* x,
          std::int64_t ldx, const QuantizedActs& acts, const void* w, std::size_t row_bytes, float* y,
          std::int64_t ldy) {
  const bool k_quant = acts.block == 256;
  for (std::int64_t n = n0; n < n1; ++n) {
    const auto* wr = static_cast<const unsigned char*>(w) + static_cast<std::size_t>(n) * row_bytes;
    for (std::int64_t m0 = 0; m0 < M; m0 += 4) {
      const int R = static_cast<int>(M - m0 < 4 ? M - m0 : 4);
      RowPtrs a{};
      for (int r = 0; r < R; ++r) {
        const std::int64_t m = m0 + r;
        a.x[r] = x + m * ldx;
        if (acts.block) {
          a.q[r] = acts.qrow(m);
          a.d[r] = acts.drow(m);
          a.s[r] = k_quant && wtype == DType::q6_k ? acts.s16row(m) : acts.s32row(m);
        }
      }
      float out[4];
      switch (R) {
        case 4: dispatch_rows<4>(wtype, wr, K, a, out); break;
        case 3: dispatch_rows<3>(wtype, wr, K, a, out); break;
        case 2: dispatch_rows<2>(wtype, wr, K, a, out); break;
        default: dispatch_rows<1>(wtype, wr, K, a, out); break;
      }
      for (int r = 0; r < R; ++r) y[(m0 + r) * ldy + n] = out[r];
    }
  }
}

}  // namespace

const RowsFn rows_avx512_vnni = &rows;

}  // namespace tfm::kernels::qgemm_detail
