// q4_0 <-> q4_0x16 (layout in quant_repack.h) and the dispatch of its matrix product.
#include "kernels/quant_repack.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/parallel.h"
#include "kernels/qgemm.h"
#include "kernels/quant_blocks.h"
#include "tfm/error.h"
#include "tfm/runtime.h"

namespace tfm::kernels {
namespace {

constexpr std::size_t kBlock = sizeof(BlockQ4_0);      // 18: fp16 d, 16 nibble bytes
constexpr std::size_t kGroupBlock = kQ4x16Rows * kBlock;  // 288

void check_shape(const char* what, std::int64_t rows, std::int64_t K) {
  TFM_CHECK(K % 32 == 0 && rows >= 0 && K >= 0, what, "q4_0x16 holds rows of whole 32-element blocks; (", rows, ", ",
            K, ") does not fit");
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
  const std::int64_t groups = rows / kQ4x16Rows;
  for (std::int64_t g = 0; g < groups; ++g)
    deinterleave(static_cast<const unsigned char*>(in) + static_cast<std::size_t>(g) * group,
                 static_cast<unsigned char*>(out) + static_cast<std::size_t>(g) * group, K / 32, row_bytes);
  const std::size_t done = static_cast<std::size_t>(groups) * group;  // the tail rows are plain q4_0
  std::memcpy(static_cast<unsigned char*>(out) + done, static_cast<const unsigned char*>(in) + done,
              static_cast<std::size_t>(rows % kQ4x16Rows) * row_bytes);
}

void dequantize_q4_0x16_row(const void* matrix, std::int64_t N, std::int64_t row, std::int64_t K, float* out) {
  check_shape("dequantize", N, K);
  TFM_CHECK(row >= 0 && row < N, "dequantize", "row ", row, " of a q4_0x16 matrix of ", N, " rows");
  const std::size_t row_bytes = dtype_row_bytes(DType::q4_0, K), group = kQ4x16Rows * row_bytes;
  const auto* base = static_cast<const unsigned char*>(matrix);
  if (row >= N / kQ4x16Rows * kQ4x16Rows) return dequantize_rows(DType::q4_0, base + static_cast<std::size_t>(row) * row_bytes, out, 1, K);
  const unsigned char* g = base + static_cast<std::size_t>(row / kQ4x16Rows) * group;
  const std::int64_t r = row % kQ4x16Rows;
  BlockQ4_0 blk;
  for (std::int64_t b = 0; b < K / 32; ++b) {  // the row's block b, gathered from its lane
    const unsigned char* gb = g + static_cast<std::size_t>(b) * kGroupBlock;
    std::memcpy(&blk, gb + 2 * r, 2);
    for (int i = 0; i < 4; ++i) std::memcpy(reinterpret_cast<unsigned char*>(&blk) + 2 + 4 * i, gb + 32 + 64 * i + 4 * r, 4);
    dequantize_rows(DType::q4_0, &blk, out + 32 * b, 1, 32);
  }
}

namespace {
// The build for the active ISA: AVX-512 VNNI where cpuid has it, else AVX2 (also on an AVX-512
// CPU without VNNI); null under TFM_ISA=generic.
qgemm_detail::Q4x16Fn pick_kernel() {
  if (active_isa() == Isa::avx512 && cpu_info().avx512_vnni) return qgemm_detail::q4_0x16_avx512_vnni;
  if (active_isa() == Isa::avx512 || active_isa() == Isa::avx2) return qgemm_detail::q4_0x16_avx2;
  return nullptr;
}
}  // namespace

bool q4_0x16_kernel_available() { return pick_kernel() != nullptr; }

void qgemm_q4_0x16(std::int64_t M, std::int64_t N, std::int64_t K, const float* x, std::int64_t ldx, const void* w,
                   float* y, std::int64_t ldy, bool twin) {
  check_shape("qgemm", N, K);
  if (M <= 0 || N <= 0) return;
  const std::size_t row_bytes = dtype_row_bytes(DType::q4_0, K), group = kQ4x16Rows * row_bytes;
  const std::int64_t groups = N / kQ4x16Rows, tail = N % kQ4x16Rows;
  const auto* w_tail = static_cast<const unsigned char*>(w) + static_cast<std::size_t>(groups) * group;
  float* y_tail = y + groups * kQ4x16Rows;
  // Tasks of >= 32 KiB of weights, as qgemm's row kernels.
  const std::int64_t grain = std::max<std::int64_t>(1, static_cast<std::int64_t>((32u << 10) / group));
  thread_local qgemm_detail::QuantizedActs buffer;
  const qgemm_detail::QuantizedActs& acts = buffer;  // the workers read the caller's buffer
  if (const qgemm_detail::Q4x16Fn kernel = twin ? nullptr : pick_kernel()) {
    // The tail rows run q4_0's row kernel of the same ISA (rows independent of M as well).
    const bool vnni = kernel == qgemm_detail::q4_0x16_avx512_vnni;
    if (vnni)  // vectorized quantize_acts (the same values), plus q4_0's layouts for the tail
      qgemm_detail::prepare_acts_avx512_vnni(tail ? DType::q4_0 : DType::q4_0x16, M, K, x, ldx, buffer);
    else
      qgemm_detail::quantize_acts(DType::q4_0, M, K, x, ldx, buffer);
    parallel_for(groups, grain, [&](std::int64_t g0, std::int64_t g1) { kernel(M, g0, g1, K, acts, w, y, ldy); });
    if (tail)
      (vnni ? qgemm_detail::rows_avx512_vnni : qgemm_detail::rows_avx2)(DType::q4_0, M, 0, tail, K, x, ldx, acts,
                                                                         w_tail, row_bytes, y_tail, ldy);
    return;
  }
  // The twin: each group back to q4_0 rows, then the scalar integer kernel of q4_0.
  qgemm_detail::quantize_acts(DType::q4_0, M, K, x, ldx, buffer);
  if (tail) qgemm_detail::rows_twin(DType::q4_0, M, 0, tail, K, x, ldx, acts, w_tail, row_bytes, y_tail, ldy);
  parallel_for(groups, grain, [&](std::int64_t g0, std::int64_t g1) {
    std::vector<unsigned char> rows(group);
    for (std::int64_t g = g0; g < g1; ++g) {
      unpack_q4_0x16(static_cast<const unsigned char*>(w) + static_cast<std::size_t>(g) * group, rows.data(),
                     kQ4x16Rows, K);
      qgemm_detail::rows_twin(DType::q4_0, M, 0, kQ4x16Rows, K, x, ldx, acts, rows.data(), row_bytes,
                              y + g * kQ4x16Rows, ldy);
    }
  });
}

}  // namespace tfm::kernels
