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
  // dot_sum saturates for unsigned bytes above 127 (vpmaddubsw's int16 pair sums): no biased
  // unsigned path (q8_0x16 takes dot_s8).
  static constexpr bool kUnsignedDot = false;
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
    return dot_sum_scaled<N, kMaxU>(acc, u, s, _mm256_set1_epi16(1));  // every lane's scale 1
  }
  // acc + Σ over each lane's 4 bytes of w·x, both signed (q8_0 weights): vpmaddubsw takes |w|
  // as its unsigned operand and x with w's sign (vpsignb); |w| <= 128 and |x| <= 127 keep each
  // int16 pair sum within range, so every term widens on its own.
  static T dot_s8(T acc, T w, T x) {
    const T pairs = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
    return _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
  }
  // For the k-quants' per-lane sub-block scales (qgemm_repacked_impl.h): bit logic and shifts
  // within 32-bit lanes, byte j of each lane as an int32, and int16 pair products.
  static T and_(T a, T b) { return _mm256_and_si256(a, b); }
  static T or_(T a, T b) { return _mm256_or_si256(a, b); }
  static T sub(T a, T b) { return _mm256_sub_epi32(a, b); }
  template <int n>
  static T shl(T a) { return _mm256_slli_epi32(a, n); }
  template <int n>
  static T shr(T a) { return _mm256_srli_epi32(a, n); }
  template <bool kSigned>
  static T byte_i32(T v, int j) {
    if constexpr (kSigned)
      return _mm256_sra_epi32(_mm256_sll_epi32(v, _mm_cvtsi32_si128(24 - 8 * j)), _mm_cvtsi32_si128(24));
    else
      return _mm256_and_si256(_mm256_srl_epi32(v, _mm_cvtsi32_si128(8 * j)), _mm256_set1_epi32(0xFF));
  }
  // Bytes 0 and 2 (kOdd false) or 1 and 3 of each lane as its two int16 halves.
  template <bool kSigned, bool kOdd>
  static T bytes_i16(T v) {
    if constexpr (kSigned) return _mm256_srai_epi16(kOdd ? v : _mm256_slli_epi16(v, 8), 8);
    else return kOdd ? _mm256_srli_epi16(v, 8) : _mm256_and_si256(v, _mm256_set1_epi32(0x00FF00FF));
  }
  // Per lane a.lo·b.lo + a.hi·b.hi over int16 halves (vpmaddwd).
  static T madd16(T a, T b) { return _mm256_madd_epi16(a, b); }
  // The int16 pair (lo, hi) in every lane.
  static T pair16(std::int16_t lo, std::int16_t hi) {
    return _mm256_set1_epi32(static_cast<std::int32_t>(static_cast<std::uint16_t>(lo) |
                                                       (static_cast<std::uint32_t>(static_cast<std::uint16_t>(hi)) << 16)));
  }
  // dot_sum_scaled's scale operand from int32 lanes in [-32768, 32767]: the low half copied to
  // the high one, as vpmaddwd multiplies both int16 pair sums of a lane by it.
  static T scale_operand(T sc) {
    const __m128i dup = _mm_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13);  // per 128-bit half
    return _mm256_shuffle_epi8(sc, _mm256_broadcastsi128_si256(dup));
  }
  // acc + sc · Σ over the lanes' bytes of u·s (sc from scale_operand): the int16 pair sums of
  // as many terms as cannot overflow (8 for nibbles, 2 for 6-bit values) are added before each
  // vpmaddwd, which multiplies them by the scale on the way to int32.
  template <int N, int kMaxU>
  static T dot_sum_scaled(T acc, const T (&u)[N], const T (&s)[N], T sc) {
    constexpr int kGroup = 32767 / (2 * kMaxU * 127) > 0 ? 32767 / (2 * kMaxU * 127) : 1;
    for (int j0 = 0; j0 < N; j0 += kGroup) {
      T pairs = _mm256_maddubs_epi16(u[j0], s[j0]);
      for (int j = j0 + 1; j < N && j < j0 + kGroup; ++j) pairs = _mm256_add_epi16(pairs, _mm256_maddubs_epi16(u[j], s[j]));
      acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pairs, sc));
    }
    return acc;
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
  // vpdpbusd adds u8·s8 products into int32 without saturating: any unsigned byte goes.
  static constexpr bool kUnsignedDot = true;
  using T = __m512i;
  static T load(const void* p) { return _mm512_loadu_si512(p); }
  static T set1_i32(std::int32_t v) { return _mm512_set1_epi32(v); }
  static T bcast4(const void* p) {
    std::int32_t v;
    std::memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
  }
  // bcast4 of signed bytes x as the unsigned bytes x + 128 (the sign bit flipped).
  static T bcast4_biased(const void* p) { return _mm512_xor_si512(bcast4(p), _mm512_set1_epi8(static_cast<char>(0x80))); }
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
  // acc + Σ over each lane's 4 bytes of w·x, both signed: vpdpbusd on |w| and x negated where
  // w < 0 (AVX-512 has no vpsignb; where w is 0 the product is 0 either way).
  static T dot_s8(T acc, T w, T x) {
    const T signed_x = _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(w), _mm512_setzero_si512(), x);
    return _mm512_dpbusd_epi32(acc, _mm512_abs_epi8(w), signed_x);
  }
  // The k-quants' scale logic, as IVec<Avx2> documents it, on 16 lanes.
  static T and_(T a, T b) { return _mm512_and_si512(a, b); }
  static T or_(T a, T b) { return _mm512_or_si512(a, b); }
  static T sub(T a, T b) { return _mm512_sub_epi32(a, b); }
  template <int n>
  static T shl(T a) { return _mm512_slli_epi32(a, n); }
  template <int n>
  static T shr(T a) { return _mm512_srli_epi32(a, n); }
  template <bool kSigned>
  static T byte_i32(T v, int j) {
    if constexpr (kSigned)
      return _mm512_sra_epi32(_mm512_sll_epi32(v, _mm_cvtsi32_si128(24 - 8 * j)), _mm_cvtsi32_si128(24));
    else
      return _mm512_and_si512(_mm512_srl_epi32(v, _mm_cvtsi32_si128(8 * j)), _mm512_set1_epi32(0xFF));
  }
  template <bool kSigned, bool kOdd>
  static T bytes_i16(T v) {
    if constexpr (kSigned) return _mm512_srai_epi16(kOdd ? v : _mm512_slli_epi16(v, 8), 8);
    else return kOdd ? _mm512_srli_epi16(v, 8) : _mm512_and_si512(v, _mm512_set1_epi32(0x00FF00FF));
  }
  static T madd16(T a, T b) { return _mm512_madd_epi16(a, b); }
  static T pair16(std::int16_t lo, std::int16_t hi) {
    return _mm512_set1_epi32(static_cast<std::int32_t>(static_cast<std::uint16_t>(lo) |
                                                       (static_cast<std::uint32_t>(static_cast<std::uint16_t>(hi)) << 16)));
  }
  static T scale_operand(T sc) {
    const __m128i dup = _mm_setr_epi8(0, 1, 0, 1, 4, 5, 4, 5, 8, 9, 8, 9, 12, 13, 12, 13);  // per 128-bit quarter
    return _mm512_shuffle_epi8(sc, _mm512_broadcast_i32x4(dup));
  }
  // As IVec<Avx2>'s (vpmaddubsw pair sums, then vpmaddwd by the scale): the same exact integers.
  template <int N, int kMaxU>
  static T dot_sum_scaled(T acc, const T (&u)[N], const T (&s)[N], T sc) {
    constexpr int kGroup = 32767 / (2 * kMaxU * 127) > 0 ? 32767 / (2 * kMaxU * 127) : 1;
    for (int j0 = 0; j0 < N; j0 += kGroup) {
      T pairs = _mm512_maddubs_epi16(u[j0], s[j0]);
      for (int j = j0 + 1; j < N && j < j0 + kGroup; ++j) pairs = _mm512_add_epi16(pairs, _mm512_maddubs_epi16(u[j], s[j]));
      acc = _mm512_add_epi32(acc, _mm512_madd_epi16(pairs, sc));
    }
    return acc;
  }
  static __m512 to_float(T a) { return _mm512_cvtepi32_ps(a); }
  static void store_i8(std::int8_t* dst, __m512 v) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst), _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(v)));
  }
  static __m512 load_f16(const void* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(static_cast<const __m256i*>(p))); }
};
#endif

}  // namespace tfm::kernels::simd
