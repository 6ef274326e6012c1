// Plain block rows <-> their x16 types (layout in quant_repack.h), and the dispatch of their
// matrix products.
#include "kernels/quant_repack.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/parallel.h"
#include "kernels/qgemm.h"
#include "kernels/quant_blocks.h"
#include "tfm/error.h"
#include "tfm/runtime.h"

namespace tfm::kernels {
namespace {

// One x16 type's geometry: its plain block cut into segments, each spread over the group block
// in turn. A segment of 2-byte units (an fp16 scale) puts row r's unit at 2r; one of 4-byte units
// (weights, packed scales) puts row r's unit i at 64i + 4r (vector i, lane r). Both are
// "unit i of row r at 16·unit·i + unit·r" from the segment's start.
struct Segment {
  std::size_t at, bytes, unit;  // in the plain block: offset, length; 2 or 4
};
struct Geometry {
  DType plain, x16;
  std::int64_t elems;       // elements per block: 32 or 256
  std::size_t block;        // bytes of a plain block
  std::size_t group_block;  // 16 x block
  Segment seg[4];           // in group-block order
  int segments;
};

Geometry geometry(DType t) {
  switch (t) {
    case DType::q4_0: case DType::q4_0x16:
      return {DType::q4_0, DType::q4_0x16, 32, sizeof(BlockQ4_0), 16 * sizeof(BlockQ4_0), {{0, 2, 2}, {2, 16, 4}}, 2};
    case DType::q8_0: case DType::q8_0x16:
      return {DType::q8_0, DType::q8_0x16, 32, sizeof(BlockQ8_0), 16 * sizeof(BlockQ8_0), {{0, 2, 2}, {2, 32, 4}}, 2};
    case DType::q4_k: case DType::q4_kx16:  // d, dmin, the 12 bytes of 6-bit scales and mins, 128 of nibbles
      return {DType::q4_k, DType::q4_kx16, 256, sizeof(BlockQ4_K), 16 * sizeof(BlockQ4_K),
              {{0, 2, 2}, {2, 2, 2}, {4, 12, 4}, {16, 128, 4}}, 4};
    case DType::q6_k: case DType::q6_kx16:  // d first, then the 16 scales, ql, qh
      return {DType::q6_k, DType::q6_kx16, 256, sizeof(BlockQ6_K), 16 * sizeof(BlockQ6_K),
              {{208, 2, 2}, {192, 16, 4}, {0, 128, 4}, {128, 64, 4}}, 4};
    default: fail("repack", "weights of type ", dtype_name(t), " have no 16-row interleaved layout");
  }
}

void check_shape(const Geometry& g, const char* what, std::int64_t rows, std::int64_t K) {
  TFM_CHECK(K % g.elems == 0 && rows >= 0 && K >= 0, what, dtype_name(g.x16), " holds rows of whole ", g.elems,
            "-element blocks; (", rows, ", ", K, ") does not fit");
}

// Plain block `blk` of row r <-> its place in group block `o`.
template <bool kToLanes>
void move_lanes(const Geometry& g, const unsigned char* src, unsigned char* dst, std::int64_t r) {
  std::size_t base = 0;  // the segment's start in the group block
  for (int s = 0; s < g.segments; ++s) {
    const Segment& sg = g.seg[s];
    for (std::size_t i = 0; i < sg.bytes / sg.unit; ++i) {
      const std::size_t lane = base + 16 * sg.unit * i + sg.unit * static_cast<std::size_t>(r), plain = sg.at + sg.unit * i;
      if constexpr (kToLanes) std::memcpy(dst + lane, src + plain, sg.unit);
      else std::memcpy(dst + plain, src + lane, sg.unit);
    }
    base += 16 * sg.bytes;
  }
}
void to_lanes(const Geometry& g, const unsigned char* blk, unsigned char* o, std::int64_t r) { move_lanes<true>(g, blk, o, r); }
void from_lanes(const Geometry& g, const unsigned char* o, unsigned char* blk, std::int64_t r) {
  move_lanes<false>(g, o, blk, r);
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

// The kernel for the active ISA and its tail-row kernel: the AVX-512 VNNI builds where cpuid has
// VNNI, else the AVX2 builds (also on an AVX-512 CPU without VNNI); null under TFM_ISA=generic.
struct Kernels {
  qgemm_detail::X16Fn groups = nullptr;
  qgemm_detail::RowsFn tail = nullptr;
  bool vnni = false;
  bool repack = true;  // false: the plain type's kernels decode faster at batch 1 (loads keep it plain)
};
Kernels pick_kernels(DType plain) {
  const bool avx512 = active_isa() == Isa::avx512, avx2 = avx512 || active_isa() == Isa::avx2;
  if (avx512 && cpu_info().avx512_vnni) {
    switch (plain) {
      case DType::q4_0: return {qgemm_detail::q4_0x16_avx512_vnni, qgemm_detail::rows_avx512_vnni, true};
      case DType::q8_0: return {qgemm_detail::q8_0x16_avx512_vnni, qgemm_detail::rows_avx512_vnni, true};
      case DType::q4_k: return {qgemm_detail::q4_kx16_avx512_vnni, qgemm_detail::rows_avx512_vnni, true};
      // q6_k's AVX-512 tiles decode batch 1 ~12% faster than its x16 build (which wins at batch
      // 8 and prefill by 8-35%; docs/benchmarks.md): its loads stay plain there.
      case DType::q6_k: return {qgemm_detail::q6_kx16_avx512_vnni, qgemm_detail::rows_avx512_vnni, true, false};
      default: return {};
    }
  }
  if (!avx2) return {};
  if (plain == DType::q4_0) return {qgemm_detail::q4_0x16_avx2, qgemm_detail::rows_avx2, false};
  switch (plain) {
    case DType::q8_0: return {qgemm_detail::q8_0x16_avx2, qgemm_detail::rows_avx2, false};
    case DType::q4_k: return {qgemm_detail::q4_kx16_avx2, qgemm_detail::rows_avx2, false};
    case DType::q6_k: return {qgemm_detail::q6_kx16_avx2, qgemm_detail::rows_avx2, false};
    default: return {};
  }
}

}  // namespace

DType x16_type(DType plain) {
  switch (plain) {
    case DType::q4_0: return DType::q4_0x16;
    case DType::q8_0: return DType::q8_0x16;
    case DType::q4_k: return DType::q4_kx16;
    case DType::q6_k: return DType::q6_kx16;
    default: return plain;
  }
}
DType x16_plain(DType x16) {
  switch (x16) {
    case DType::q4_0x16: return DType::q4_0;
    case DType::q8_0x16: return DType::q8_0;
    case DType::q4_kx16: return DType::q4_k;
    case DType::q6_kx16: return DType::q6_k;
    default: return x16;
  }
}
bool dtype_is_x16(DType t) { return x16_plain(t) != t; }

void repack_x16(DType plain, void* data, std::int64_t N, std::int64_t K) {
  const Geometry g = geometry(plain);
  check_shape(g, "repack", N, K);
  const std::size_t row_bytes = dtype_row_bytes(g.plain, K), group = kX16Rows * row_bytes;
  std::vector<unsigned char> rows(group);  // one group's plain rows: the only extra memory
  auto* p = static_cast<unsigned char*>(data);
  for (std::int64_t gi = 0; gi < N / kX16Rows; ++gi) {
    unsigned char* at = p + static_cast<std::size_t>(gi) * group;
    std::memcpy(rows.data(), at, group);
    interleave(g, rows.data(), at, K / g.elems, row_bytes);
  }
}

void unpack_x16(DType x16, const void* in, void* out, std::int64_t rows, std::int64_t K) {
  const Geometry g = geometry(x16);
  check_shape(g, "unpack", rows, K);
  const std::size_t row_bytes = dtype_row_bytes(g.plain, K), group = kX16Rows * row_bytes;
  const std::int64_t groups = rows / kX16Rows;
  for (std::int64_t gi = 0; gi < groups; ++gi)
    deinterleave(g, static_cast<const unsigned char*>(in) + static_cast<std::size_t>(gi) * group,
                 static_cast<unsigned char*>(out) + static_cast<std::size_t>(gi) * group, K / g.elems, row_bytes);
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
  unsigned char blk[sizeof(BlockQ6_K)];  // the largest plain block
  for (std::int64_t b = 0; b < K / g.elems; ++b) {  // the row's block b, gathered from its lane
    from_lanes(g, grp + static_cast<std::size_t>(b) * g.group_block, blk, row % kX16Rows);
    dequantize_rows(g.plain, blk, out + g.elems * b, 1, g.elems);
  }
}

bool x16_kernel_available(DType plain) {
  const Kernels k = pick_kernels(plain);
  return k.groups != nullptr && k.repack;
}

bool x16_software_prefetch() {
  static const bool on = [] {
    if (const char* env = std::getenv("TFM_PREFETCH"); env != nullptr && *env != '\0') return std::string(env) != "0";
    return !cpu_info().avx512f;
  }();
  return on;
}

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
    buffer.prefetch_weights = x16_software_prefetch();
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
