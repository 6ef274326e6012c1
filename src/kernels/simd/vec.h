// A thin fp32 SIMD vector type per instruction set, so each kernel body is written once as
// a template over the ISA and compiled per ISA (files *_avx2.cpp / *_avx512.cpp get those
// flags; see src/CMakeLists.txt).
//
//   template <class V> void scale(const float* x, float a, float* y, int64_t n) {
//     const V va = V::set1(a);
//     int64_t i = 0;
//     for (; i + V::width <= n; i += V::width) V::store(y + i, V::mul(V::load(x + i), va));
//     const int rest = int(n - i);
//     if (rest) V::store_partial(y + i, V::mul(V::load_partial(x + i, rest), va), rest);
//   }
//
// V is Vec<Generic> (portable, 8 lanes in plain arrays), Vec<Avx2> (8 lanes) or
// Vec<Avx512> (16 lanes). Only include the AVX specialisations' users in TUs compiled for
// them. Keep such TUs free of non-template inline helpers compiled with wider flags: the
// linker may keep that copy for baseline callers (the usual multi-ISA ODR trap).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace tfm::kernels::simd {

struct Generic {};
struct Avx2 {};
struct Avx512 {};

template <class Isa>
struct Vec;

// ---- portable: 8 lanes in an array; GCC turns the loops into SSE ------------------------
template <>
struct Vec<Generic> {
  using isa = Generic;  // (for kernels keyed on the ISA itself: simd/transpose.h)
  static constexpr int width = 8;
  struct T {
    float v[8];
  };
  using type = T;
  static T set1(float x) { T r; for (int i = 0; i < 8; ++i) r.v[i] = x; return r; }
  static T zero() { return set1(0.0f); }
  static T load(const float* p) { T r; std::memcpy(r.v, p, sizeof r.v); return r; }
  static void store(float* p, T a) { std::memcpy(p, a.v, sizeof a.v); }
  static T load_partial(const float* p, int n, float fill = 0.0f) {
    T r = set1(fill);
    for (int i = 0; i < n; ++i) r.v[i] = p[i];
    return r;
  }
  static void store_partial(float* p, T a, int n) { for (int i = 0; i < n; ++i) p[i] = a.v[i]; }
#define TFM_GENERIC_BINARY(name, expr) \
  static T name(T a, T b) { T r; for (int i = 0; i < 8; ++i) { float x = a.v[i], y = b.v[i]; r.v[i] = (expr); } return r; }
  TFM_GENERIC_BINARY(add, x + y)
  TFM_GENERIC_BINARY(sub, x - y)
  TFM_GENERIC_BINARY(mul, x * y)
  TFM_GENERIC_BINARY(div, x / y)
  TFM_GENERIC_BINARY(max, x > y ? x : y)
  TFM_GENERIC_BINARY(min, x < y ? x : y)
#undef TFM_GENERIC_BINARY
  // Unfused on purpose: the baseline ISA has no FMA instruction, and std::fma there is an
  // out-of-line libm call per lane that stops vectorisation (~20x slower GELU measured).
  static T fma(T a, T b, T c) { T r; for (int i = 0; i < 8; ++i) r.v[i] = a.v[i] * b.v[i] + c.v[i]; return r; }
  static T sqrt(T a) { T r; for (int i = 0; i < 8; ++i) r.v[i] = std::sqrt(a.v[i]); return r; }
  static T abs(T a) { T r; for (int i = 0; i < 8; ++i) r.v[i] = std::fabs(a.v[i]); return r; }
  // Round to nearest even without a libm call: adding and removing 1.5 * 2^23 leaves the
  // integer part (exact for |x| < 2^22, the range the callers use). IEEE semantics (no
  // -ffast-math) keep the compiler from folding the pair away.
  static T round(T a) {
    T r;
    for (int i = 0; i < 8; ++i) r.v[i] = (a.v[i] + 12582912.0f) - 12582912.0f;
    return r;
  }
  // 2^n for integral-valued n in [-126, 127].
  static T pow2i(T n) {
    T r;
    for (int i = 0; i < 8; ++i) {
      const std::uint32_t bits = static_cast<std::uint32_t>(static_cast<std::int32_t>(n.v[i]) + 127) << 23;
      std::memcpy(&r.v[i], &bits, 4);
    }
    return r;
  }
  // Lane-wise select: a where mask (a > b style comparison), else c.
  static T select_gt(T a, T b, T if_true, T if_false) {
    T r; for (int i = 0; i < 8; ++i) r.v[i] = a.v[i] > b.v[i] ? if_true.v[i] : if_false.v[i]; return r;
  }
  // Horizontal reductions in a fixed lane order (tree), so results are reproducible.
  static float reduce_add(T a) {
    return ((a.v[0] + a.v[4]) + (a.v[2] + a.v[6])) + ((a.v[1] + a.v[5]) + (a.v[3] + a.v[7]));
  }
  static float reduce_max(T a) { float m = a.v[0]; for (int i = 1; i < 8; ++i) m = a.v[i] > m ? a.v[i] : m; return m; }
};

#if defined(__AVX2__)
template <>
struct Vec<Avx2> {
  using isa = Avx2;  // (for kernels keyed on the ISA itself: simd/transpose.h)
  static constexpr int width = 8;
  using T = __m256;
  using type = T;
  static T set1(float x) { return _mm256_set1_ps(x); }
  static T zero() { return _mm256_setzero_ps(); }
  static T load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, T a) { _mm256_storeu_ps(p, a); }
  static __m256i tail_mask(int n) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static T load_partial(const float* p, int n, float fill = 0.0f) {
    const __m256i m = tail_mask(n);
    return _mm256_blendv_ps(set1(fill), _mm256_maskload_ps(p, m), _mm256_castsi256_ps(m));
  }
  static void store_partial(float* p, T a, int n) { _mm256_maskstore_ps(p, tail_mask(n), a); }
  static T add(T a, T b) { return _mm256_add_ps(a, b); }
  static T sub(T a, T b) { return _mm256_sub_ps(a, b); }
  static T mul(T a, T b) { return _mm256_mul_ps(a, b); }
  static T div(T a, T b) { return _mm256_div_ps(a, b); }
  static T max(T a, T b) { return _mm256_max_ps(a, b); }
  static T min(T a, T b) { return _mm256_min_ps(a, b); }
  static T fma(T a, T b, T c) { return _mm256_fmadd_ps(a, b, c); }
  static T sqrt(T a) { return _mm256_sqrt_ps(a); }
  static T abs(T a) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), a); }
  static T round(T a) { return _mm256_round_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static T pow2i(T n) {
    const __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
    return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
  }
  static T select_gt(T a, T b, T if_true, T if_false) {
    return _mm256_blendv_ps(if_false, if_true, _mm256_cmp_ps(a, b, _CMP_GT_OQ));
  }
  static float reduce_add(T a) {  // same pairing as Generic: (0+4),(2+6),(1+5),(3+7)
    const __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));  // 0+4,1+5,2+6,3+7
    const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));  // (0+4)+(2+6), (1+5)+(3+7)
    return _mm_cvtss_f32(_mm_add_ss(t, _mm_shuffle_ps(t, t, 1)));
  }
  static float reduce_max(T a) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_max_ss(s, _mm_shuffle_ps(s, s, 1)));
  }
};
#endif

#if defined(__AVX512F__)
template <>
struct Vec<Avx512> {
  using isa = Avx512;  // (for kernels keyed on the ISA itself: simd/transpose.h)
  static constexpr int width = 16;
  using T = __m512;
  using type = T;
  static T set1(float x) { return _mm512_set1_ps(x); }
  static T zero() { return _mm512_setzero_ps(); }
  static T load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, T a) { _mm512_storeu_ps(p, a); }
  static __mmask16 tail_mask(int n) { return static_cast<__mmask16>((1u << n) - 1u); }
  static T load_partial(const float* p, int n, float fill = 0.0f) {
    return _mm512_mask_loadu_ps(set1(fill), tail_mask(n), p);
  }
  static void store_partial(float* p, T a, int n) { _mm512_mask_storeu_ps(p, tail_mask(n), a); }
  static T add(T a, T b) { return _mm512_add_ps(a, b); }
  static T sub(T a, T b) { return _mm512_sub_ps(a, b); }
  static T mul(T a, T b) { return _mm512_mul_ps(a, b); }
  static T div(T a, T b) { return _mm512_div_ps(a, b); }
  static T max(T a, T b) { return _mm512_max_ps(a, b); }
  static T min(T a, T b) { return _mm512_min_ps(a, b); }
  static T fma(T a, T b, T c) { return _mm512_fmadd_ps(a, b, c); }
  static T sqrt(T a) { return _mm512_sqrt_ps(a); }
  static T abs(T a) { return _mm512_abs_ps(a); }
  static T round(T a) { return _mm512_roundscale_ps(a, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static T pow2i(T n) {
    const __m512i e = _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127));
    return _mm512_castsi512_ps(_mm512_slli_epi32(e, 23));
  }
  static T select_gt(T a, T b, T if_true, T if_false) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, b, _CMP_GT_OQ), if_false, if_true);
  }
  // Written out rather than _mm512_reduce_*_ps, which trips a GCC 12 -Wmaybe-uninitialized.
  static float reduce_add(T a) {
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(a),
                                   _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
    return Vec<Avx2>::reduce_add(h);
  }
  static float reduce_max(T a) {
    const __m256 h = _mm256_max_ps(_mm512_castps512_ps256(a),
                                   _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a), 1)));
    return Vec<Avx2>::reduce_max(h);
  }
};
#endif

}  // namespace tfm::kernels::simd
