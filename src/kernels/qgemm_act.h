// What the fast compact-weight kernels share: activations quantized on the fly to int8 blocks
// (as llama.cpp's q8_0 / q8_K), and the per-ISA kernel signature.
//
// Why integer dots: at batch 1 the product reads every weight once, so its speed is the
// weights' bytes over the memory bandwidth — provided decoding a block costs fewer cycles
// than streaming it. Multiplying 4-bit or 8-bit weights by int8 activations with one
// vpdpbusd per 64 pairs (or vpmaddubsw + vpmaddwd on AVX2) and one float multiply per block
// keeps the core well under the memory time; converting every weight to f32 first does not.
//
// Activation format (per row of K):
// - block 32 (weights q8_0, q4_0): d[b] = max|x| / 127 over x[32b, 32b+32), q = rint(x / d),
//   sum32[b] = Σ q (for q4_0's -8 offset).
// - block 256 (q4_k, q6_k): d[b] over x[256b, 256b+256), bsum16[i] = Σ q over 16-element
//   groups (the k-quants' sub-block minimums and offsets).
// d = 0 for an all-zero block (q all 0). The scale stays f32 (llama.cpp rounds it to fp16).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tfm/dtype.h"

namespace tfm::kernels::qgemm_detail {

struct QuantizedActs {
  std::int64_t rows = 0, K = 0, block = 32;
  // K / block, set with the sizes (size_acts): drow runs inside the kernels' block loops, where
  // a division by the run-time block size stayed, once per block and row.
  std::int64_t blocks_per_row = 0;
  std::vector<std::int8_t> q;       // rows * K
  std::vector<float> d;             // rows * K / block
  std::vector<std::int16_t> sum32;  // rows * K / 32
  std::vector<std::int16_t> bsum16; // rows * K / 16 (block 256 only)
  // Layouts derived for one ISA's kernels (PrepareActsFn), left empty by quantize_acts:
  std::vector<std::uint8_t> xu;  // q + 128 as u8 (vpdpbusd's unsigned operand), xu_stride per row;
                                 // q4_0: q (signed) in quads of blocks, low then high halves
  std::vector<std::int32_t> xoff;  // q4_0: -8 x the sum of each lane's 8 q (the nibbles' offset)
  std::vector<float> dxv;        // q8_0: per pair of blocks 8 x d[2p], 8 x d[2p + 1]; q4_0: 4 x d[b]
  std::vector<std::int16_t> s32pad;  // q4_k: sum32 with blocks padded to a multiple of 4
  std::vector<float> dx4;            // q4_k: 4 x d[b] per block, padded as s32pad
  std::int64_t xu_stride = 0, xoff_stride = 0, dxv_stride = 0, s32pad_stride = 0, dx4_stride = 0;
  // Whether the x16 kernels prefetch the weight blocks ahead of their reads (set per call by
  // qgemm_x16 from x16_software_prefetch(), quant_repack.h).
  bool prefetch_weights = true;
  const std::int8_t* qrow(std::int64_t m) const { return q.data() + m * K; }
  const float* drow(std::int64_t m) const { return d.data() + m * blocks_per_row; }
  const std::int16_t* s32row(std::int64_t m) const { return sum32.data() + m * (K / 32); }
  const std::int16_t* s16row(std::int64_t m) const { return bsum16.data() + m * (K / 16); }
};

// Activation block for a weight type: 32 for q8_0/q4_0, 256 for q4_k/q6_k, 0 for float types
// (f16 multiplies the f32 activations, bf16 the activations rounded to bf16: qgemm_bf16.h).
std::int64_t act_block(DType wtype);
void quantize_acts(DType wtype, std::int64_t M, std::int64_t K, const float* x, std::int64_t ldx, QuantizedActs& out);
// Its parts, shared with the vectorized quantizers (qgemm_act_impl.h): the buffers sized for
// M rows of K, and row m's sums of 32 (and 16) q from its q.
void size_acts(DType wtype, std::int64_t M, std::int64_t K, QuantizedActs& out);
void block_sums(QuantizedActs& a, std::int64_t m);

// One ISA's kernel over weight rows [n0, n1) for all M rows: y[m, n] for n in [n0, n1).
// For block types `acts` holds the quantized activations; bf16/f16 read x.
using RowsFn = void (*)(DType wtype, std::int64_t M, std::int64_t n0, std::int64_t n1, std::int64_t K,
                        const float* x, std::int64_t ldx, const QuantizedActs& acts, const void* w,
                        std::size_t row_bytes, float* y, std::int64_t ldy);

// The scalar twin (also the generic-ISA kernel): the same integer arithmetic, one term at a
// time in index order.
void rows_twin(DType wtype, std::int64_t M, std::int64_t n0, std::int64_t n1, std::int64_t K, const float* x,
               std::int64_t ldx, const QuantizedActs& acts, const void* w, std::size_t row_bytes, float* y,
               std::int64_t ldy);
// Block-quantized weights only, on activations from the ISA's PrepareActsFn.
using BlockRowsFn = void (*)(DType wtype, std::int64_t M, std::int64_t n0, std::int64_t n1, std::int64_t K,
                             const QuantizedActs& acts, const void* w, std::size_t row_bytes, float* y, std::int64_t ldy);
// quantize_acts (bit-identical results, vectorized) plus the ISA's derived layouts.
using PrepareActsFn = void (*)(DType wtype, std::int64_t M, std::int64_t K, const float* x, std::int64_t ldx,
                               QuantizedActs& acts);
// AVX-512 VNNI tiles over several activation and weight rows (qgemm_blocks_avx512.cpp).
extern const BlockRowsFn block_rows_avx512_vnni;
extern const PrepareActsFn prepare_acts_avx512_vnni;
// The AVX2 build: quantize_acts vectorized and threaded over rows (no derived layouts).
extern const PrepareActsFn prepare_acts_avx2;
// AVX2 (vpmaddubsw) and AVX-512 VNNI (vpdpbusd) builds; null where not compiled.
extern const RowsFn rows_avx2, rows_avx512_vnni;

}  // namespace tfm::kernels::qgemm_detail
