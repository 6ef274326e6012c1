// q4_0 <-> q4_0x16 (layout in quant_repack.h) and the dispatch of its matrix product.
#include "kernels/quant_repack.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/parallel.h"
#include "kernels/quant_blocks.h"
#include "tfm/error.h"
#include "tfm/runtime.h"

namespace tfm::kernels {
namespace {

constexpr std::size_t kBlock = sizeof(BlockQ4_0);      // 18: fp16 d, 16 nibble bytes
constexpr std::size_t kGroupBlock = kQ4x16Rows * kBlock;  // 288

void check_shape(const char* what, std::int64_t rows, std::int64_t K) {
  TFM_CHECK(rows % kQ4x16Rows == 0 && K % 32 == 0 && rows >= 0 && K >= 0, what, "q4_0x16 holds groups of ",
            kQ4x16Rows, " rows of whole 32-element blocks; (", rows, ", ", K, ") does not fit");
}

// One group: 16 q4_0 rows (row_bytes apart) <-> the interleaved blocks.
void interleave(const unsigned char* rows, unsigned char* out, std::int64_t nb, std::size_t row_bytes) {
  for (std::int64_t b = 0; b < nb; ++b) {
    unsigned char* o = out + static_cast<std::size_t>(b) * kGroupBlock;
    for (std::int64_t r = 0; r < kQ4x16Rows; ++r) {
      const unsigned char* blk = rows + static_cast<std::size_t>(r) * row_bytes + static_cast<std::size_t>(b) * kBlock;
      std::memcpy(o + 2 * r, blk, 2);
      for (int i = 0; i < 4; ++i) std::memcpy(o + 32 + 64 * i + 4 * r, blk + 2 + 4 * i, 4);
    }
  }
}
void deinterleave(const unsigned char* in, unsigned char* rows, std::int64_t nb, std::size_t row_bytes) {
  for (std::int64_t b = 0; b < nb; ++b) {
    const unsigned char* g = in + static_cast<std::size_t>(b) * kGroupBlock;
    for (std::int64_t r = 0; r < kQ4x16Rows; ++r) {
      unsigned char* blk = rows + static_cast<std::size_t>(r) * row_bytes + static_cast<std::size_t>(b) * kBlock;
      std::memcpy(blk, g + 2 * r, 2);
      for (int i = 0; i < 4; ++i) std::memcpy(blk + 2 + 4 * i, g + 32 + 64 * i + 4 * r, 4);
    }
  }
}

}  // namespace

void repack_q4_0x16(void* data, std::int64_t N, std::int64_t K) {
  check_shape("repack", N, K);
  const std::size_t row_bytes = dtype_row_bytes(DType::q4_0, K), group = kQ4x16Rows * row_bytes;
  std::vector<unsigned char> rows(group);  // one group's q4_0 rows: the only extra memory
  auto* p = static_cast<unsigned char*>(data);
  for (std::int64_t g = 0; g < N / kQ4x16Rows; ++g) {
    unsigned char* at = p + static_cast<std::size_t>(g) * group;
    std::memcpy(rows.data(), at, group);
    interleave(rows.data(), at, K / 32, row_bytes);
  }
}

void unpack_q4_0x16(const void* in, void* out, std::int64_t rows, std::int64_t K) {
  check_shape("unpack", rows, K);
  const std::size_t row_bytes = dtype_row_bytes(DType::q4_0, K), group = kQ4x16Rows * row_bytes;
  for (std::int64_t g = 0; g < rows / kQ4x16Rows; ++g)
    deinterleave(static_cast<const unsigned char*>(in) + static_cast<std::size_t>(g) * group,
                 static_cast<unsigned char*>(out) + static_cast<std::size_t>(g) * group, K / 32, row_bytes);
}

bool q4_0x16_kernel_available() {
  return active_isa() == Isa::avx512 && cpu_info().avx512_vnni && qgemm_detail::q4_0x16_avx512_vnni != nullptr;
}

void qgemm_q4_0x16(std::int64_t M, std::int64_t N, std::int64_t K, const float* x, std::int64_t ldx, const void* w,
                   float* y, std::int64_t ldy, bool twin) {
  check_shape("qgemm", N, K);
  if (M <= 0 || N <= 0) return;
  const std::size_t group = kQ4x16Rows * dtype_row_bytes(DType::q4_0, K);
  // Tasks of >= 32 KiB of weights, as qgemm's row kernels.
  const std::int64_t grain = std::max<std::int64_t>(1, static_cast<std::int64_t>((32u << 10) / group));
  thread_local qgemm_detail::QuantizedActs buffer;
  const qgemm_detail::QuantizedActs& acts = buffer;  // the workers read the caller's buffer
  if (!twin && q4_0x16_kernel_available()) {
    qgemm_detail::prepare_acts_avx512_vnni(DType::q4_0x16, M, K, x, ldx, buffer);
    parallel_for(N / kQ4x16Rows, grain, [&](std::int64_t g0, std::int64_t g1) {
      qgemm_detail::q4_0x16_avx512_vnni(M, g0, g1, K, acts, w, y, ldy);
    });
    return;
  }
  // The twin: each group back to q4_0 rows, then the scalar integer kernel of q4_0.
  qgemm_detail::quantize_acts(DType::q4_0, M, K, x, ldx, buffer);
  parallel_for(N / kQ4x16Rows, grain, [&](std::int64_t g0, std::int64_t g1) {
    std::vector<unsigned char> rows(group);
    for (std::int64_t g = g0; g < g1; ++g) {
      unpack_q4_0x16(static_cast<const unsigned char*>(w) + static_cast<std::size_t>(g) * group, rows.data(),
                     kQ4x16Rows, K);
      qgemm_detail::rows_twin(DType::q4_0, M, 0, kQ4x16Rows, K, x, ldx, acts, rows.data(), group / kQ4x16Rows,
                              y + g * kQ4x16Rows, ldy);
    }
  });
}

}  // namespace tfm::kernels
