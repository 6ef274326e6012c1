// The q4_0x16 kernel's AVX-512 VNNI build (qgemm_repacked_impl.h): 16 rows per vector,
// one vpdpbusd per 64 weight-activation pairs.
// GCC 12 false positive inside avx512fintrin.h (see norm_avx512.cpp).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "kernels/qgemm_repacked_impl.h"

namespace tfm::kernels::qgemm_detail {

const X16Fn q4_0x16_avx512_vnni = &x16_groups<Q4_0x16<simd::Avx512>, 4>;
const X16Fn q8_0x16_avx512_vnni = &x16_groups<Q8_0x16<simd::Avx512>, 4>;
const X16Fn q4_kx16_avx512_vnni = &x16_groups<Q4_Kx16<simd::Avx512>, 4>;
const X16Fn q6_kx16_avx512_vnni = &x16_groups<Q6_Kx16<simd::Avx512>, 4>;

}  // namespace tfm::kernels::qgemm_detail
