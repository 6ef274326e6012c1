// The integer companion of Vec<Isa> for the compact-weight kernels: weight bytes and int8
// activations in, exact int32 sums out, one lane per Vec<Isa> float lane. A kernel written over
// (Vec<Isa>, IVec<Isa>) is compiled per ISA like the float kernels (vec.h).
//
// The operation that differs most between instruction sets is the byte dot product
//   dot(acc, u, s):  acc[lane] + Σ over the lane's 4 bytes of u·s   (u unsigned, s signed)
// which AVX-512 VNNI (and AVX-VNNI) do in one vpdpbusd, and AVX2 in two: vpmaddubsw multiplies
// byte pairs into int16 sums, vpmaddwd by ones adds those pairs into int32. dot_sum takes
// several such terms at once so AVX2 can add the int16 pair sums before widening (one vpmaddwd
// for up to eight vpmaddubsw), which is exact while the int16 sum cannot overflow: the caller
// states the largest u (15 for nibbles), and with |s| <= 127 (quantize_acts never makes -128)
// terms x 2 x max_u x 127 must stay <= 32767. Every build gives the same exact integers, so a
// kernel's float arithmetic after them — and its results — are the same on every ISA.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/simd/vec.h"

namespace tfm::kernels::simd {

template <class Isa>
struct IVec;

#if defined(__AVX2__)
template <>
struct IVec<Avx2> {
  static constexpr int lanes = 8;
  using T = __m256i;
  static T load(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }
  static T set1_i32(std::int32_t v) { return _mm256_set1_epi32(v); }
  // The same 4 bytes in every lane (4 activations against each lane's 4 weights).
  static T bcast4(const void* p) {
    std::int32_t v;
    std::memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
  }
  static T low_nibbles(T v) { return _mm256_and_si256(v, _mm256_set1_epi8(0x0F)); }
  static T high_nibbles(T v) { return _mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0F)); }
  static T add(T a, T b) { return _mm256_add_epi32(a, b); }
  template <int N, int kMaxU>
  static T dot_sum(T acc, const T (&u)[N], const T (&s)[N]) {
    const T ones = _mm256_set1_epi16(1);
    if constexpr (N * 2 * kMaxU * 127 <= 32767) {
      T pairs = _mm256_maddubs_epi16(u[0], s[0]);
      for (int j = 1; j < N; ++j) pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(u[j], s[j]));
      return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, ones));
    } else {
      for (int j = 0; j < N; ++j) acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u[j], s[j]), ones));
      return acc;
    }
  }
  // acc + Σ over each lane's 4 bytes of w·x, both signed (q8_0 weights): vpmaddubsw takes |w|
  // as its unsigned operand and x with w's sign (vpsignb); |w| <= 128 and |x| <= 127 keep each
  // int16 pair sum within range, so every term widens on its own.
  static T dot_s8(T acc, T w, T x) {
    const T pairs = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
  }
  static __m256 to_float(T a) { return _mm256_cvtepi32_ps(a); }
  // The 8 floats rounded to the nearest integer (ties to even, as std::nearbyint in the default
  // rounding mode), saturated to int8, stored as 8 bytes.
  static void store_i8(std::int8_t* dst, __m256 v) {
    const __m256i i32 = _mm256_cvtps_epi32(v);
    const __m256i i16 = _mm256_packs_epi32(i32, i32);  // per 128-bit lane: a0-3 a0-3 | a4-7 a4-7
    const __m256i i8 = _mm256_packs_epi16(i16, i16);   // bytes 0-3 of each lane: a0-3 | a4-7
    _mm_storel_epi64(reinterpret_cast<__m128i*>(dst),
                     _mm_unpacklo_epi32(_mm256_castsi256_si128(i8), _mm256_extracti128_si256(i8, 1)));
  }
  // 8 fp16 values (F16C) to the float lanes.
  static __m256 load_f16(const void* p) { return _mm256_cvtph_ps(_mm_loadu_si128(static_cast<const __m128i*>(p))); }
};
#endif

#if defined(__AVX512F__) && defined(__AVX512VNNI__)
template <>
struct IVec<Avx512> {
  static constexpr int lanes = 16;
  using T = __m512i;
  static T load(const void* p) { return _mm512_loadu_si512(p); }
  static T set1_i32(std::int32_t v) { return _mm512_set1_epi32(v); }
  static T bcast4(const void* p) {
    std::int32_t v;
    std::memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
  }
  static T low_nibbles(T v) { return _mm512_and_si512(v, _mm512_set1_epi8(0x0F)); }
  static T high_nibbles(T v) { return _mm512_and_si512(_mm512_srli_epi16(v, 4), _mm512_set1_epi8(0x0F)); }
  static T add(T a, T b) { return _mm512_add_epi32(a, b); }
  // Two dependency chains (vpdpbusd's latency is several cycles, its throughput one or two per
  // cycle), joined at the end; integer sums, so the split changes nothing in the result.
  template <int N, int kMaxU>
  static T dot_sum(T acc, const T (&u)[N], const T (&s)[N]) {
    T other = _mm512_setzero_si512();
    for (int j = 0; j + 1 < N; j += 2) {
      acc = _mm512_dpbusd_epi32(acc, u[j], s[j]);
      other = _mm512_dpbusd_epi32(other, u[j + 1], s[j + 1]);
    }
    if constexpr (N % 2) acc = _mm512_dpbusd_epi32(acc, u[N - 1], s[N - 1]);
    return _mm512_add_epi32(acc, other);
  }
  static __m512 to_float(T a) { return _mm512_cvtepi32_ps(a); }
  static void store_i8(std::int8_t* dst, __m512 v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(v)));
  }
  static __m512 load_f16(const void* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(static_cast<const __m256i*>(p))); }
};
#endif

}  // namespace tfm::kernels::simd
