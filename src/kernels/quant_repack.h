// Block-quantized weights repacked at load for the decode kernels: q4_0 -> DType::q4_0x16,
// q8_0 -> DType::q8_0x16, q4_k -> DType::q4_kx16, q6_k -> DType::q6_kx16 ("x16 types").
//
// Why: a q4_0 or q8_0 block keeps its fp16 scale beside its 16 or 32 bytes of weights, so a
// kernel that walks one row gathers runs 18 or 34 bytes apart, converts scales one at a time and
// sums each row horizontally: measured compute-bound below the memory's read rate
// (docs/benchmarks.md, "q4_0 repacked at load"). Interleaving 16 rows per block puts one output
// row in each 32-bit lane: per block of 16 rows one 32-byte load of scales, 64-byte loads of
// weights, no shuffles and no horizontal sums, and the weights stream as one sequential run.
//
// Layout: the first N - N % 16 rows in groups of 16; group g is K / 32 (K / 256) blocks of 16 x
// the plain block's bytes, block b = the plain block's fields one after the other, each spread
// over the 16 rows: an fp16 field as 16 values (row r at 2r), a byte field as 64-byte vectors,
// vector i's 32-bit lane r = bytes 4i..4i+3 of row r's field. In order:
//   q4_0  (288 bytes)   d; 4 vectors of nibbles (low: elements 4i..4i+3, high: 16+4i..)
//   q8_0  (544 bytes)   d; 8 vectors of weights (elements 4i..4i+3)
//   q4_k (2304 bytes)   d; dmin; 3 vectors of packed 6-bit scales and mins; 32 of nibbles
//   q6_k (3360 bytes)   d; 4 vectors of int8 scales; 32 of ql; 16 of qh
// (the k-quants' bytes within a field keep their plain order, so the kernels decode them as
// the plain row kernels do, 16 rows at once).
// The last N % 16 rows stay plain rows after the groups (a vocabulary of 50257 rows has one),
// so any N repacks. The same bytes as the plain matrix, so repacking happens in place (no
// second copy).
#pragma once

#include <cstdint>

#include "kernels/qgemm_act.h"

namespace tfm::kernels {

constexpr std::int64_t kX16Rows = 16;  // rows per interleaved group

// The x16 type of a plain block type (q4_0 -> q4_0x16, ...), or `plain` itself when
// it has none; and back.
DType x16_type(DType plain);
DType x16_plain(DType x16);
bool dtype_is_x16(DType t);

// Plain (N, K) -> its x16 type, in place; fails unless K is whole blocks.
void repack_x16(DType plain, void* data, std::int64_t N, std::int64_t K);
// An x16 matrix (rows, K) -> plain rows (out may not alias in): a whole matrix, or whole groups.
void unpack_x16(DType x16, const void* in, void* out, std::int64_t rows, std::int64_t K);
// Row `row` of an x16 matrix of N rows, dequantized to f32 (an embedding gather).
void dequantize_x16_row(DType x16, const void* matrix, std::int64_t N, std::int64_t row, std::int64_t K, float* out);
// Whether loads should repack `plain` here: this CPU and TFM_ISA run a kernel for its x16 type
// (repacking elsewhere only costs time), and it decodes faster than the plain type's (q6_k on
// AVX-512 VNNI does not). qgemm runs x16 weights given to it either way.
bool x16_kernel_available(DType plain);
// Whether the q8_0, q4_0 and q4_k x16 kernels prefetch weight blocks ahead of their reads
// (q6_k's always does). On a Zen 3 (AVX2 only) the prefetch took q8_0's reads from memory from
// 13.0-15.2 to 14.7-16.1 GB/s and q4_k's from 14.4 to 17.3-18.7; on a Zen 4 (AVX-512) it cost
// these three kernels 3-15% in both the AVX2 and the AVX-512 builds, the core's own
// prefetchers keeping up without it (docs/benchmarks.md, "Software prefetch by CPU"). So: on
// where the CPU has no AVX-512, off where it has (whatever TFM_ISA forces); TFM_PREFETCH=0 / 1
// overrides, for measuring.
bool x16_software_prefetch();

// qgemm for x16 weights: the ISA's kernel (the tail rows by the plain type's row kernel), or
// the scalar twin (groups unpacked, then qgemm_detail::rows_twin). Rows stay independent.
void qgemm_x16(DType x16, std::int64_t M, std::int64_t N, std::int64_t K, const float* x, std::int64_t ldx,
               const void* w, float* y, std::int64_t ldy, bool twin);

namespace qgemm_detail {
// Groups [g0, g1) of 16 rows for all M activation rows (activations as quantize_acts makes them
// for the plain type; qgemm_repacked_impl.h).
using X16Fn = void (*)(std::int64_t M, std::int64_t g0, std::int64_t g1, std::int64_t K, const QuantizedActs& acts,
                       const void* w, float* y, std::int64_t ldy);
extern const X16Fn q4_0x16_avx512_vnni, q8_0x16_avx512_vnni, q4_kx16_avx512_vnni, q6_kx16_avx512_vnni;
extern const X16Fn q4_0x16_avx2, q8_0x16_avx2, q4_kx16_avx2, q6_kx16_avx2;
}  // namespace qgemm_detail

}  // namespace tfm::kernels
