// Element types and the scalar fp32 <-> bf16 / f16 conversions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tfm {

// q8_0, q4_0, q4_k and q6_k are llama.cpp's block-quantized weight formats (layouts in
// src/kernels/quant_blocks.h): a row of n elements is n / dtype_block_elems blocks of
// dtype_block_bytes bytes each. They exist as weights only (matmul operand, embedding rows).
// q4_0x16, q8_0x16, q4_kx16 and q6_kx16 are q4_0, q8_0, q4_k and q6_k repacked at load for the decode kernels
// (kernels/quant_repack.h): groups of 16 rows interleaved block by block, the same bytes per row
// on average. Internal only: never read from or written to a file, and its rows are not
// separable.
enum class DType : std::uint8_t { f32, bf16, f16, i32, i64, i8, u8, q8_0, q4_0, q4_k, q6_k, q4_0x16, q8_0x16, q4_kx16, q6_kx16 };

std::size_t dtype_size(DType t);        // bytes per element; fails for block types
bool dtype_is_block(DType t);           // q8_0, q4_0, q4_k, q6_k and their x16 types
std::int64_t dtype_block_elems(DType t);   // 32 / 256 for block types, 1 otherwise
std::size_t dtype_block_bytes(DType t);    // bytes per block (= dtype_size for scalar types)
// Bytes of n consecutive elements; for block types n must be a multiple of the block size
// (fails naming the type and n otherwise).
std::size_t dtype_row_bytes(DType t, std::int64_t n);
const char* dtype_name(DType t);        // "f32", "bf16", ..., "q4_k"
DType dtype_from_name(const std::string& name);  // accepts ours and safetensors' ("F32", "BF16", ...)
const char* dtype_safetensors_name(DType t);     // "F32", "BF16", "F16", "I32", "I64", "I8", "U8"
bool dtype_is_float(DType t);

// Round-to-nearest-even fp32 -> bf16; NaN stays NaN (quiet), Inf stays Inf.
std::uint16_t f32_to_bf16(float x);
float bf16_to_f32(std::uint16_t h);
// IEEE binary16 with round-to-nearest-even, subnormals, overflow to Inf, NaN kept.
std::uint16_t f32_to_f16(float x);
float f16_to_f32(std::uint16_t h);

}  // namespace tfm
