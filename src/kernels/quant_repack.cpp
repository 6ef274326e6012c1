// Plain block rows <-> their x16 types (layout in quant_repack.h), and the dispatch of their
// matrix products.
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

// One x16 type's geometry: its plain block (fp16 scale + `data` weight bytes) and a group's.
struct Geometry {
  DType plain, x16;
  std::size_t block;        // bytes of a plain block: 18 or 34
  std::size_t data;         // its weight bytes: 16 or 32 (data / 4 vectors per group block)
  std::size_t group_block;  // 16 x block
};

Geometry geometry(DType t) {
  switch (t) {
    case DType::q4_0: case DType::q4_0x16: return {DType::q4_0, DType::q4_0x16, sizeof(BlockQ4_0), 16, 16 * sizeof(BlockQ4_0)};
    case DType::q8_0: case DType::q8_0x16: return {DType::q8_0, DType::q8_0x16, sizeof(BlockQ8_0), 32, 16 * sizeof(BlockQ8_0)};
    default: fail("repack", "weights of type ", dtype_name(t), " have no 16-row interleaved layout");
  }
}

void check_shape(const Geometry& g, const char* what, std::int64_t rows, std::int64_t K) {
  TFM_CHECK(K % 32 == 0 && rows >= 0 && K >= 0, what, dtype_name(g.x16), " holds rows of whole 32-element blocks; (",
            rows, ", ", K, ") does not fit");
}

// Plain block `blk` of row r <-> its place in group block `o`.
void to_lanes(const Geometry& g, const unsigned char* blk, unsigned char* o, std::int64_t r) {
  std::memcpy(o + 2 * r, blk, 2);
  for (std::size_t i = 0; i < g.data / 4; ++i) std::memcpy(o + 32 + 64 * i + 4 * r, blk + 2 + 4 * i, 4);
}
void from_lanes(const Geometry& g, const unsigned char* o, unsigned char* blk, std::int64_t r) {
  std::memcpy(blk, o + 2 * r, 2);
  for (std::size_t i = 0; i < g.data / 4; ++i) std::memcpy(blk + 2 + 4 * i, o + 32 + 64 * i + 4 * r, 4);
}

// One group: 16 plain rows (row_bytes apart) <-> the interleaved blocks.
void interleave(const Geometry& g, const unsigned char* rows, unsigned char* out, std::int64_t nb, std::size_t row_bytes) {
  for (std::int64_t b = 0; b < nb; ++b)
    for (std::int64_t r = 0; r < kX16Rows; ++r)
      to_lanes(g, rows + static_cast<std::size_t>(r) * row_bytes + static_cast<std::size_t>(b) * g.block,
               out + static_cast<std::size_t>(b) * g.group_block, r);
}
void deinterleave(const Geometry& g, const unsigned char* in, unsigned char* rows, std::int64_t nb, std::size_t row_bytes) {
  for (std::int64_t b = 0; b < nb; ++b)
    for (std::int64_t r = 0; r < kX16Rows; ++r)
      from_lanes(g, in + static_cast<std::size_t>(b) * g.group_block,
                 rows + static_cast<std::size_t>(r) * row_bytes + static_cast<std::size_t>(b) * g.block, r);
}

// The kernel for the active ISA and its tail-row kernel: q4_0x16 on AVX-512 VNNI where cpuid has
// it, else the AVX2 builds (also on an AVX-512 CPU without VNNI); null under TFM_ISA=generic.
struct Kernels {
  qgemm_detail::X16Fn groups = nullptr;
  qgemm_detail::RowsFn tail = nullptr;
  bool vnni = false;
};
Kernels pick_kernels(DType plain) {
  const bool avx512 = active_isa() == Isa::avx512, avx2 = avx512 || active_isa() == Isa::avx2;
  if (plain == DType::q4_0 && avx512 && cpu_info().avx512_vnni)
    return {qgemm_detail::q4_0x16_avx512_vnni, qgemm_detail::rows_avx512_vnni, true};
  if (!avx2) return {};
  if (plain == DType::q4_0) return {qgemm_detail::q4_0x16_avx2, qgemm_detail::rows_avx2, false};
  // q8_0 keeps its AVX-512 VNNI tiles where they run (no q8_0x16 build for them yet).
  if (plain == DType::q8_0 && !(avx512 && cpu_info().avx512_vnni))
    return {qgemm_detail::q8_0x16_avx2, qgemm_detail::rows_avx2, false};
  return {};
}

}  // namespace

DType x16_type(DType plain) {
  return plain == DType::q4_0 ? DType::q4_0x16 : plain == DType::q8_0 ? DType::q8_0x16 : plain;
}
DType x16_plain(DType x16) { return x16 == DType::q4_0x16 ? DType::q4_0 : x16 == DType::q8_0x16 ? DType::q8_0 : x16; }
bool dtype_is_x16(DType t) { return t == DType::q4_0x16 || t == DType::q8_0x16; }

void repack_x16(DType plain, void* data, std::int64_t N, std::int64_t K) {
  const Geometry g = geometry(plain);
  check_shape(g, "repack", N, K);
  const std::size_t row_bytes = dtype_row_bytes(g.plain, K), group = kX16Rows * row_bytes;
  std::vector<unsigned char> rows(group);  // one group's plain rows: the only extra memory
  auto* p = static_cast<unsigned char*>(data);
  for (std::int64_t gi = 0; gi < N / kX16Rows; ++gi) {
    unsigned char* at = p + static_cast<std::size_t>(gi) * group;
    std::memcpy(rows.data(), at, group);
    interleave(g, rows.data(), at, K / 32, row_bytes);
  }
}

void unpack_x16(DType x16, const void* in, void* out, std::int64_t rows, std::int64_t K) {
  const Geometry g = geometry(x16);
  check_shape(g, "unpack", rows, K);
  const std::size_t row_bytes = dtype_row_bytes(g.plain, K), group = kX16Rows * row_bytes;
  const std::int64_t groups = rows / kX16Rows;
  for (std::int64_t gi = 0; gi < groups; ++gi)
    deinterleave(g, static_cast<const unsigned char*>(in) + static_cast<std::size_t>(gi) * group,
                 static_cast<unsigned char*>(out) + static_cast<std::size_t>(gi) * group, K / 32, row_bytes);
  const std::size_t done = static_cast<std::size_t>(groups) * group;  // the tail rows are plain
  std::memcpy(static_cast<unsigned char*>(out) + done, static_cast<const unsigned char*>(in) + done,
              static_cast<std::size_t>(rows % kX16Rows) * row_bytes);
}

void dequantize_x16_row(DType x16, const void* matrix, std::int64_t N, std::int64_t row, std::int64_t K, float* out) {
  const Geometry g = geometry(x16);
  check_shape(g, "dequantize", N, K);
  TFM_CHECK(row >= 0 && row < N, "dequantize", "row ", row, " of a ", dtype_name(g.x16), " matrix of ", N, " rows");
  const std::size_t row_bytes = dtype_row_bytes(g.plain, K), group = kX16Rows * row_bytes;
  const auto* base = static_cast<const unsigned char*>(matrix);
  if (row >= N / kX16Rows * kX16Rows)
    return dequantize_rows(g.plain, base + static_cast<std::size_t>(row) * row_bytes, out, 1, K);
  const unsigned char* grp = base + static_cast<std::size_t>(row / kX16Rows) * group;
  unsigned char blk[sizeof(BlockQ8_0)];  // the largest plain block
  for (std::int64_t b = 0; b < K / 32; ++b) {  // the row's block b, gathered from its lane
    from_lanes(g, grp + static_cast<std::size_t>(b) * g.group_block, blk, row % kX16Rows);
    dequantize_rows(g.plain, blk, out + 32 * b, 1, 32);
  }
}

bool x16_kernel_available(DType plain) { return pick_kernels(plain).groups != nullptr; }

void qgemm_x16(DType x16, std::int64_t M, std::int64_t N, std::int64_t K, const float* x, std::int64_t ldx,
               const void* w, float* y, std::int64_t ldy, bool twin) {
  const Geometry g = geometry(x16);
  check_shape(g, "qgemm", N, K);
  if (M <= 0 || N <= 0) return;
  const std::size_t row_bytes = dtype_row_bytes(g.plain, K), group = kX16Rows * row_bytes;
  const std::int64_t groups = N / kX16Rows, tail = N % kX16Rows;
  const auto* w_tail = static_cast<const unsigned char*>(w) + static_cast<std::size_t>(groups) * group;
  float* y_tail = y + groups * kX16Rows;
  // Tasks of >= 32 KiB of weights, as qgemm's row kernels.
  const std::int64_t grain = std::max<std::int64_t>(1, static_cast<std::int64_t>((32u << 10) / group));
  thread_local qgemm_detail::QuantizedActs buffer;
  const qgemm_detail::QuantizedActs& acts = buffer;  // the workers read the caller's buffer
  if (const Kernels k = twin ? Kernels{} : pick_kernels(g.plain); k.groups != nullptr) {
    if (k.vnni)  // vectorized quantize_acts (the same values), plus the plain type's layouts for the tail
      qgemm_detail::prepare_acts_avx512_vnni(tail ? g.plain : g.x16, M, K, x, ldx, buffer);
    else
      qgemm_detail::prepare_acts_avx2(g.plain, M, K, x, ldx, buffer);
    parallel_for(groups, grain, [&](std::int64_t g0, std::int64_t g1) { k.groups(M, g0, g1, K, acts, w, y, ldy); });
    // The tail rows run the plain type's row kernel of the same ISA (rows independent of M as well).
    if (tail) k.tail(g.plain, M, 0, tail, K, x, ldx, acts, w_tail, row_bytes, y_tail, ldy);
    return;
  }
  // The twin: each group back to plain rows, then the plain type's scalar integer kernel.
  qgemm_detail::quantize_acts(g.plain, M, K, x, ldx, buffer);
  if (tail) qgemm_detail::rows_twin(g.plain, M, 0, tail, K, x, ldx, acts, w_tail, row_bytes, y_tail, ldy);
  parallel_for(groups, grain, [&](std::int64_t g0, std::int64_t g1) {
    std::vector<unsigned char> rows(group);
    for (std::int64_t gi = g0; gi < g1; ++gi) {
      unpack_x16(g.x16, static_cast<const unsigned char*>(w) + static_cast<std::size_t>(gi) * group, rows.data(),
                 kX16Rows, K);
      qgemm_detail::rows_twin(g.plain, M, 0, kX16Rows, K, x, ldx, acts, rows.data(), row_bytes,
                              y + gi * kX16Rows, ldy);
    }
  });
}

}  // namespace tfm::kernels
