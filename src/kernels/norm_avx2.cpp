// LayerNorm / RMSNorm row kernels compiled for AVX2 + FMA (8 lanes).
#include "kernels/norm_rows.h"

namespace tfm::kernels::norm_rows {
const Table avx2_table = make_table<simd::Avx2>();
}
