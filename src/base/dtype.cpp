// DType names and sizes, and scalar half-precision conversions (the naive twins of the
// vectorised converters in src/kernels/convert*.cpp).
#include "tfm/dtype.h"

#include <cstring>

#include "tfm/error.h"

namespace tfm {

std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: case DType::i32: return 4;
    case DType::bf16: case DType::f16: return 2;
    case DType::i64: return 8;
    case DType::i8: case DType::u8: return 1;
    case DType::q8_0: case DType::q4_0: case DType::q4_k: case DType::q6_k: case DType::q4_0x16: case DType::q8_0x16:
    case DType::q4_kx16: case DType::q6_kx16:
      fail("dtype", dtype_name(t), " is a block-quantized type: it has no per-element size (use dtype_row_bytes)");
  }
  return 0;
}

bool dtype_is_block(DType t) {
  return t == DType::q8_0 || t == DType::q4_0 || t == DType::q4_k || t == DType::q6_k || t == DType::q4_0x16 ||
         t == DType::q8_0x16 || t == DType::q4_kx16 || t == DType::q6_kx16;
}

std::int64_t dtype_block_elems(DType t) {
  switch (t) {
    case DType::q8_0: case DType::q4_0: case DType::q4_0x16: case DType::q8_0x16: return 32;
    case DType::q4_k: case DType::q6_k: case DType::q4_kx16: case DType::q6_kx16: return 256;
    default: return 1;
  }
}

std::size_t dtype_block_bytes(DType t) {
  // Sizes of ggml's block_q8_0, block_q4_0, block_q4_K, block_q6_K (static_asserts beside
  // their structs in src/kernels/quant_blocks.h).
  switch (t) {
    case DType::q8_0: case DType::q8_0x16: return 34;  // x16 types: per row, on average
    case DType::q4_0: case DType::q4_0x16: return 18;
    case DType::q4_k: case DType::q4_kx16: return 144;
    case DType::q6_k: case DType::q6_kx16: return 210;
    default: return dtype_size(t);
  }
}

std::size_t dtype_row_bytes(DType t, std::int64_t n) {
  const std::int64_t be = dtype_block_elems(t);
  if (n < 0 || n % be != 0)
    fail("dtype", dtype_name(t), " stores rows in blocks of ", be, " elements; a row of ", n, " does not fit");
  return static_cast<std::size_t>(n / be) * dtype_block_bytes(t);
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::bf16: return "bf16";
    case DType::f16: return "f16";
    case DType::i32: return "i32";
    case DType::i64: return "i64";
    case DType::i8: return "i8";
    case DType::u8: return "u8";
    case DType::q8_0: return "q8_0";
    case DType::q4_0: return "q4_0";
    case DType::q4_k: return "q4_k";
    case DType::q6_k: return "q6_k";
    case DType::q4_0x16: return "q4_0x16";
    case DType::q8_0x16: return "q8_0x16";
    case DType::q4_kx16: return "q4_kx16";
    case DType::q6_kx16: return "q6_kx16";
  }
  return "?";
}

const char* dtype_safetensors_name(DType t) {
  switch (t) {
    case DType::f32: return "F32";
    case DType::bf16: return "BF16";
    case DType::f16: return "F16";
    case DType::i32: return "I32";
    case DType::i64: return "I64";
    case DType::i8: return "I8";
    case DType::u8: return "U8";
    default: fail("dtype", dtype_name(t), " has no safetensors dtype name");
  }
  return "?";
}

DType dtype_from_name(const std::string& name) {
  for (DType t : {DType::f32, DType::bf16, DType::f16, DType::i32, DType::i64, DType::i8, DType::u8}) {
    if (name == dtype_name(t) || name == dtype_safetensors_name(t)) return t;
  }
  for (DType t : {DType::q8_0, DType::q4_0, DType::q4_k, DType::q6_k})
    if (name == dtype_name(t)) return t;
  fail("dtype", "unknown dtype '", name, "' (allowed: f32, bf16, f16, i32, i64, i8, u8, q8_0, q4_0, q4_k, q6_k)");
}

bool dtype_is_float(DType t) { return t == DType::f32 || t == DType::bf16 || t == DType::f16; }

namespace {
std::uint32_t bits_of(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}
float float_of(std::uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}
}  // namespace

std::uint16_t f32_to_bf16(float x) {
  std::uint32_t u = bits_of(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
  return static_cast<std::uint16_t>(u >> 16);
}

float bf16_to_f32(std::uint16_t h) { return float_of(static_cast<std::uint32_t>(h) << 16); }

std::uint16_t f32_to_f16(float x) {
  const std::uint32_t u = bits_of(x);
  const std::uint32_t sign = (u >> 16) & 0x8000u;
  const std::uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);  // NaN
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: Inf
  if (abs < 0x38800000u) {  // below 2^-14: subnormal half (or zero)
    // Scale so the half's subnormal unit (2^-24) lands on the float integer grid, letting the
    // FPU do round-to-nearest-even for us.
    const float scaled = float_of(abs) * 16777216.0f;  // * 2^24
    const std::uint32_t m = static_cast<std::uint32_t>(__builtin_rintf(scaled));
    return static_cast<std::uint16_t>(sign | m);
  }
  // Normal: rebias exponent (127 -> 15), keep 10 mantissa bits, round to nearest even.
  std::uint32_t h = abs - 0x38000000u;  // exponent -= 112
  h += 0xfffu + ((h >> 13) & 1u);
  return static_cast<std::uint16_t>(sign | (h >> 13));
}

float f16_to_f32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  const std::uint32_t man = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: man * 2^-24
    const float v = static_cast<float>(man) * (1.0f / 16777216.0f);
    return float_of(bits_of(v) | sign);
  }
  if (exp == 31) return float_of(sign | 0x7f800000u | (man << 13));  // Inf / NaN
  return float_of(sign | ((exp + 112) << 23) | (man << 13));
}

}  // namespace tfm
