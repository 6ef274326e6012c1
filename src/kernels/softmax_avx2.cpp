// softmax row kernels compiled for AVX2 + FMA (8 lanes).
#include "kernels/softmax_rows.h"

namespace tfm::kernels::softmax_rows {
const Table avx2_table = make_table<simd::Avx2>();
}
