// Compact-weight kernels for AVX2 without VNNI: the u8 x s8 dot of 32 pairs is vpmaddubsw
// (pairs into int16; no saturation for these ranges: |w| <= 128 or 63 or 15 times |x| <= 127,
// two products per lane stay below 32767) then vpmaddwd (into int32, by ones or by the
// sub-block scales). Same arithmetic as the scalar twin (qgemm_twin.cpp) and the AVX-512 VNNI
// build; rows of activations up to 4 at a time share each block's decoding, every row running
// the same instruction sequence whatever M is (batch invariance).
#include <immintrin.h>

#include <cstring>

#include "kernels/qgemm_act.h"
#include "kernels/qgemm_act_impl.h"
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
__m128i load128(const void* p) { return _mm_loadu_si128(static_cast<const __m128i*>(p)); }
float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
float hsum128(__m128 s) {
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}
// The vpshufb control that fills the low 128-bit lane with int16 element `lo` of the source
// lane and the high one with element `hi`.
__m256i spread16(int lo, int hi) {
  return _mm256_set_m128i(_mm_set1_epi16(static_cast<short>(((2 * hi + 1) << 8) | (2 * hi))),
                          _mm_set1_epi16(static_cast<short>(((2 * lo + 1) << 8) | (2 * lo))));
}
// Σ of 4 consecutive u8 x s8 products per int32 lane (vpdpbusd's result, in two steps)
__m256i dot_u8s8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}

struct RowPtrs {
  const std::int8_t* q[4];
  const float* d[4];
  const std::int16_t* s[4];
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
  for (int r = 0; r < R; ++r) out[r] = hsum(_mm256_add_ps(acc0[r], acc1[r]));
}

template <int R>
void q8_0_rows(const unsigned char* w, std::int64_t K, const RowPtrs& a, float* out) {
  auto step = [&](std::int64_t b, __m256* acc) {
    const unsigned char* wb = w + b * static_cast<std::int64_t>(sizeof(BlockQ8_0));
    const __m256i wq = load256(wb + 2);
    const __m256i aw = _mm256_abs_epi8(wq);
    const float dw = h2f(wb);
    for (int r = 0; r < R; ++r) {
      const __m256i p = dot_u8s8(aw, _mm256_sign_epi8(load256(a.q[r] + 32 * b), wq));
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
    const __m128i q = load128(wb + 2);
    const __m256i u = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(q, 4), m4), _mm_and_si128(q, m4));
    const float dw = h2f(wb);
    for (int r = 0; r < R; ++r) {
      __m256i p = dot_u8s8(u, load256(a.q[r] + 32 * b));
      p = _mm256_add_epi32(p, _mm256_zextsi128_si256(_mm_cvtsi32_si128(-8 * a.s[r][b])));
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * a.d[r][b]), acc[r]);
    }
  };
  alternating_blocks<R>(K / 32, step, out);
}

template <int R>
void q4_k_rows(const unsigned char* w, std::int64_t K, const RowPtrs& a, float* out) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  __m256 acc[R];
  __m128 accm[R];
  for (int r = 0; r < R; ++r) {
    acc[r] = _mm256_setzero_ps();
    accm[r] = _mm_setzero_ps();
  }
  for (std::int64_t b = 0; b < K / 256; ++b, w += sizeof(BlockQ4_K)) {
    std::uint32_t s3[3];
    std::memcpy(s3, w + 4, 12);
    const std::uint32_t words[4] = {s3[0] & 0x3F3F3F3Fu, (s3[2] & 0x0F0F0F0Fu) | ((s3[0] >> 2) & 0x30303030u),
                                    s3[1] & 0x3F3F3F3Fu, ((s3[2] >> 4) & 0x0F0F0F0Fu) | ((s3[1] >> 2) & 0x30303030u)};
    std::uint8_t sm[16];  // 8 scales then 8 mins
    std::memcpy(sm, words, 16);
    const __m128i M16 = _mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sm + 8)));
    // The 8 scales widened once, then each spread over a vector by one byte shuffle (a
    // broadcast from memory per scale cost three instructions each).
    const __m256i S16 = _mm256_broadcastsi128_si256(_mm_cvtepu8_epi16(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sm))));
    __m256i lo[4], hi[4], sc[8];
    for (int c = 0; c < 4; ++c) {
      const __m256i q = load256(w + 16 + 32 * c);
      lo[c] = _mm256_and_si256(q, m4);
      hi[c] = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
    }
    for (int s = 0; s < 8; ++s) sc[s] = _mm256_shuffle_epi8(S16, spread16(s, s));
    const float d = h2f(w), dmin = h2f(w + 2);
    for (int r = 0; r < R; ++r) {
      const std::int8_t* x = a.q[r] + 256 * b;
      __m256i isum = _mm256_setzero_si256();
      for (int c = 0; c < 4; ++c) {
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(lo[c], load256(x + 64 * c)), sc[2 * c]));
        isum = _mm256_add_epi32(isum,
                                _mm256_madd_epi16(_mm256_maddubs_epi16(hi[c], load256(x + 64 * c + 32)), sc[2 * c + 1]));
      }
      const __m128i mins = _mm_madd_epi16(M16, load128(a.s[r] + 8 * b));
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(d * a.d[r][b]), acc[r]);
      accm[r] = _mm_fmadd_ps(_mm_cvtepi32_ps(mins), _mm_set1_ps(dmin * a.d[r][b]), accm[r]);
    }
  }
  for (int r = 0; r < R; ++r) out[r] = hsum(acc[r]) - hsum128(accm[r]);
}

template <int R>
void q6_k_rows(const unsigned char* w, std::int64_t K, const RowPtrs& a, float* out) {
  const __m256i m4 = _mm256_set1_epi8(0x0F), m30 = _mm256_set1_epi8(0x30);
  __m256 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  for (std::int64_t b = 0; b < K / 256; ++b, w += sizeof(BlockQ6_K)) {
    const auto* scb = reinterpret_cast<const std::int8_t*>(w + 192);
    const __m256i S16 = _mm256_cvtepi8_epi16(load128(scb));
    __m256i u[8], sc[8];  // u[j]: elements 32j .. 32j + 31 (sub-blocks 2j, 2j + 1)
    for (int h = 0; h < 2; ++h) {
      const __m256i lo = load256(w + 64 * h), hi = load256(w + 64 * h + 32), qh = load256(w + 128 + 32 * h);
      u[4 * h] = _mm256_or_si256(_mm256_and_si256(lo, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 4), m30));
      u[4 * h + 1] = _mm256_or_si256(_mm256_and_si256(hi, m4), _mm256_and_si256(_mm256_slli_epi16(qh, 2), m30));
      u[4 * h + 2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(lo, 4), m4), _mm256_and_si256(qh, m30));
      u[4 * h + 3] =
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(hi, 4), m4), _mm256_and_si256(_mm256_srli_epi16(qh, 2), m30));
    }
    // sc[j]: scale 2j in the low 128-bit lane, 2j + 1 in the high one, by one byte shuffle of
    // the widened scales 0-7 or 8-15 (a broadcast per scale cost three instructions each).
    const __m256i S_lo = _mm256_broadcastsi128_si256(_mm256_castsi256_si128(S16));
    const __m256i S_hi = _mm256_broadcastsi128_si256(_mm256_extracti128_si256(S16, 1));
    for (int j = 0; j < 8; ++j) sc[j] = _mm256_shuffle_epi8(j < 4 ? S_lo : S_hi, spread16((2 * j) % 8, (2 * j + 1) % 8));
    const float d = h2f(w + 208);
    for (int r = 0; r < R; ++r) {
      const std::int8_t* x = a.q[r] + 256 * b;
      __m256i isum = _mm256_setzero_si256();
      for (int j = 0; j < 8; ++j)
        isum = _mm256_add_epi32(isum, _mm256_madd_epi16(_mm256_maddubs_epi16(u[j], load256(x + 32 * j)), sc[j]));
      const __m256i off = _mm256_madd_epi16(S16, load256(a.s[r] + 16 * b));  // levels are q - 32
      isum = _mm256_sub_epi32(isum, _mm256_slli_epi32(off, 5));
      acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(d * a.d[r][b]), acc[r]);
    }
  }
  for (int r = 0; r < R; ++r) out[r] = hsum(acc[r]);
}

template <int R, bool kBf16>
void half_rows(const unsigned char* w, std::int64_t K, const RowPtrs& a, float* out) {
  __m256 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  auto widen = [](__m128i h) {
    if constexpr (kBf16) return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    else return _mm256_cvtph_ps(h);
  };
  std::int64_t k = 0;
  int parity = 0;
  for (; k + 16 <= K; k += 16) {  // two chunks, one per accumulator (kept in registers)
    const __m256 w0 = widen(load128(w + 2 * k)), w1 = widen(load128(w + 2 * k + 16));
    for (int r = 0; r < R; ++r) {
      acc[r][0] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(a.x[r] + k), acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(a.x[r] + k + 8), acc[r][1]);
    }
  }
  if (k + 8 <= K) {
    const __m256 wf = widen(load128(w + 2 * k));
    for (int r = 0; r < R; ++r) acc[r][0] = _mm256_fmadd_ps(wf, _mm256_loadu_ps(a.x[r] + k), acc[r][0]);
    k += 8;
    parity = 1;
  }
  if (k < K) {  // the last partial vector, zero-padded
    const int rest = static_cast<int>(K - k);
    std::uint16_t wt[8] = {};
    std::memcpy(wt, w + 2 * k, 2 * static_cast<std::size_t>(rest));
    const __m256 wf = widen(load128(wt));
    for (int r = 0; r < R; ++r) {
      float xt[8] = {};
      std::memcpy(xt, a.x[r] + k, 4 * static_cast<std::size_t>(rest));
      if (parity) acc[r][1] = _mm256_fmadd_ps(wf, _mm256_loadu_ps(xt), acc[r][1]);
      else acc[r][0] = _mm256_fmadd_ps(wf, _mm256_loadu_ps(xt), acc[r][0]);
    }
  }
  for (int r = 0; r < R; ++r) out[r] = hsum(_mm256_add_ps(acc[r][0], acc[r][1]));
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
          a.s[r] = wtype == DType::q6_k ? acts.s16row(m) : acts.s32row(m);
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

const RowsFn rows_avx2 = &rows;
const PrepareActsFn prepare_acts_avx2 = &quantize_acts_vec<simd::Avx2>;

}  // namespace tfm::kernels::qgemm_detail
