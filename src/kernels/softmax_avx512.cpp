// softmax row kernels compiled for AVX-512 (16 lanes).
// GCC 12's own _mm512_reduce_add_ps trips -W(maybe-)uninitialized (a self-initialised
// _mm256_undefined_pd inside avx512fintrin.h): a false positive in the compiler's header.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include "kernels/softmax_rows.h"

namespace tfm::kernels::softmax_rows {
const Table avx512_table = make_table<simd::Avx512>();
}
