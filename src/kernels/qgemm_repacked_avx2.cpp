// The x16 kernels' AVX2 build (qgemm_repacked_impl.h): a group of 16 rows is two vectors of 8
// lanes; vpmaddubsw + vpmaddwd stand in for vpdpbusd. Two activation rows per pass: for q4_0
// the eight nibble vectors and four accumulators then fit the sixteen ymm registers (four rows
// would need eight accumulators; two against four rows per pass was not measured).
#include "kernels/qgemm_repacked_impl.h"

namespace tfm::kernels::qgemm_detail {

const X16Fn q4_0x16_avx2 = &x16_groups<Q4_0x16<simd::Avx2>, 2>;
const X16Fn q8_0x16_avx2 = &x16_groups<Q8_0x16<simd::Avx2>, 2>;
const X16Fn q4_kx16_avx2 = &x16_groups<Q4_Kx16<simd::Avx2>, 2>;
const X16Fn q6_kx16_avx2 = &x16_groups<Q6_Kx16<simd::Avx2>, 2>;

}  // namespace tfm::kernels::qgemm_detail
