// q4_0 weights repacked for the decode kernel (DType::q4_0x16).
//
// Why: a q4_0 block keeps its fp16 scale beside its 16 bytes of nibbles, so a kernel that walks
// one row gathers 16-byte runs 18 bytes apart and packs scalar scales: measured compute-bound
// at ~16 GB/s of weights per core, below the memory's read rate (docs/benchmarks.md, "q4_0 repacked at load").
// Interleaving 16 rows per block puts one output row in each 32-bit lane: per block of 16 rows
// (288 bytes) one 32-byte load of scales, four 64-byte loads of nibbles, no shuffles and no
// horizontal sums, and the weights stream as one sequential run.
//
// Layout: the first N - N % 16 rows in groups of 16; group g is K / 32 blocks of 288 bytes,
// block b =
//   bytes   0-31   the 16 rows' fp16 scales d (row r at 2r)
//   bytes  32-287  four 64-byte vectors; vector i, 32-bit lane r = bytes 4i..4i+3 of row r's
//                  16 nibble bytes (low nibbles: elements 4i..4i+3, high: 16+4i..16+4i+3)
// The last N % 16 rows stay plain q4_0 rows after the groups (a vocabulary of 50257 rows has
// one), so any N repacks. The same bytes as the q4_0 matrix, so repacking happens in place
// (no second copy).
#pragma once

#include <cstdint>

#include "kernels/qgemm_act.h"

namespace tfm::kernels {

constexpr std::int64_t kQ4x16Rows = 16;  // rows per interleaved group

// q4_0 (N, K) -> q4_0x16, in place; fails unless K % 32 == 0.
void repack_q4_0x16(void* data, std::int64_t N, std::int64_t K);
// q4_0x16 (rows, K) -> q4_0 rows (out may not alias in): a whole matrix, or whole groups.
void unpack_q4_0x16(const void* in, void* out, std::int64_t rows, std::int64_t K);
// Row `row` of a q4_0x16 matrix of N rows, dequantized to f32 (an embedding gather).
void dequantize_q4_0x16_row(const void* matrix, std::int64_t N, std::int64_t row, std::int64_t K, float* out);
// Whether this CPU and TFM_ISA run the repacked kernel (repacking elsewhere only costs time).
bool q4_0x16_kernel_available();

// qgemm for q4_0x16 weights: the AVX-512 VNNI or AVX2 build of the kernel, or the scalar twin
// (groups unpacked to q4_0, then qgemm_detail::rows_twin) under TFM_ISA=generic. Rows stay
// independent.
void qgemm_q4_0x16(std::int64_t M, std::int64_t N, std::int64_t K, const float* x, std::int64_t ldx, const void* w,
                   float* y, std::int64_t ldy, bool twin);

namespace qgemm_detail {
// Groups [g0, g1) of 16 rows for all M activation rows (activations as quantize_acts makes them
// for q4_0; qgemm_repacked_impl.h).
using Q4x16Fn = void (*)(std::int64_t M, std::int64_t g0, std::int64_t g1, std::int64_t K, const QuantizedActs& acts,
                         const void* w, float* y, std::int64_t ldy);
extern const Q4x16Fn q4_0x16_avx512_vnni, q4_0x16_avx2;
}  // namespace qgemm_detail

}  // namespace tfm::kernels
