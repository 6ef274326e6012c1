// Element types and the scalar fp32 <-> bf16 / f16 conversions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tfm {

enum class DType : std::uint8_t { f32, bf16, f16, i32, i64, i8, u8 };

std::size_t dtype_size(DType t);        // bytes per element
const char* dtype_name(DType t);        // "f32", "bf16", ...
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
