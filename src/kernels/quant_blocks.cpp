// Scalar reference (de)quantization of GGML's block formats (layouts in quant_blocks.h).
// The arithmetic order matches ggml's dequantize_row_* and quants.py (d * sc first, then
// times q, minus d_min * m), so results are bit-identical to both.
#include "kernels/quant_blocks.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "tfm/dtype.h"

namespace tfm::kernels {
namespace {

template <class Block>
Block load_block(const void* blocks, std::int64_t i) {
  Block b;
  std::memcpy(&b, static_cast<const unsigned char*>(blocks) + static_cast<std::size_t>(i) * sizeof(Block), sizeof(Block));
  return b;
}

// Every fp16 value's float, built once from f16_to_f32 (so bit-identical to it): a table
// look-up is several times faster than the branchy conversion for whole F16 tensors (ggml
// keeps the same 256 KiB table).
const float* f16_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (std::uint32_t i = 0; i < 65536; ++i) t[i] = f16_to_f32(static_cast<std::uint16_t>(i));
    return t;
  }();
  return table.data();
}

float h(std::uint16_t v) { return f16_table()[v]; }

}  // namespace

void dequantize_q8_0(const void* blocks, float* out, std::int64_t n) {
  for (std::int64_t b = 0; b < n / kQK; ++b) {
    const auto x = load_block<BlockQ8_0>(blocks, b);
    const float d = h(x.d);
    for (int j = 0; j < kQK; ++j) out[b * kQK + j] = static_cast<float>(x.qs[j]) * d;
  }
}

void dequantize_q4_0(const void* blocks, float* out, std::int64_t n) {
  for (std::int64_t b = 0; b < n / kQK; ++b) {
    const auto x = load_block<BlockQ4_0>(blocks, b);
    const float d = h(x.d);
    float* y = out + b * kQK;
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>((x.qs[j] & 0x0F) - 8) * d;
      y[j + kQK / 2] = static_cast<float>((x.qs[j] >> 4) - 8) * d;
    }
  }
}

void dequantize_q4_1(const void* blocks, float* out, std::int64_t n) {
  for (std::int64_t b = 0; b < n / kQK; ++b) {
    const auto x = load_block<BlockQ4_1>(blocks, b);
    const float d = h(x.d), m = h(x.m);
    float* y = out + b * kQK;
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>(x.qs[j] & 0x0F) * d + m;
      y[j + kQK / 2] = static_cast<float>(x.qs[j] >> 4) * d + m;
    }
  }
}

void dequantize_q5_0(const void* blocks, float* out, std::int64_t n) {
  for (std::int64_t b = 0; b < n / kQK; ++b) {
    const auto x = load_block<BlockQ5_0>(blocks, b);
    const float d = h(x.d);
    std::uint32_t qh = 0;
    for (int i = 3; i >= 0; --i) qh = (qh << 8) | x.qh[i];
    float* y = out + b * kQK;
    for (int j = 0; j < kQK / 2; ++j) {
      const int hi0 = static_cast<int>((qh >> j) & 1u) << 4;
      const int hi1 = static_cast<int>((qh >> (j + kQK / 2)) & 1u) << 4;
      y[j] = static_cast<float>(((x.qs[j] & 0x0F) | hi0) - 16) * d;
      y[j + kQK / 2] = static_cast<float>(((x.qs[j] >> 4) | hi1) - 16) * d;
    }
  }
}

void dequantize_q4_k(const void* blocks, float* out, std::int64_t n) {
  for (std::int64_t b = 0; b < n / kQKK; ++b) {
    const auto x = load_block<BlockQ4_K>(blocks, b);
    const float d = h(x.d), dmin = h(x.dmin);
    float* y = out + b * kQKK;
    const std::uint8_t* q = x.qs;
    for (int s = 0; s < 8; s += 2, q += 32, y += 64) {  // two sub-blocks share 32 bytes of nibbles
      std::uint8_t sc, m;
      scale_min_k4(s, x.scales, sc, m);
      const float d1 = d * sc, m1 = dmin * m;
      scale_min_k4(s + 1, x.scales, sc, m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) y[l] = d1 * static_cast<float>(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) y[32 + l] = d2 * static_cast<float>(q[l] >> 4) - m2;
    }
  }
}

void dequantize_q5_k(const void* blocks, float* out, std::int64_t n) {
  for (std::int64_t b = 0; b < n / kQKK; ++b) {
    const auto x = load_block<BlockQ5_K>(blocks, b);
    const float d = h(x.d), dmin = h(x.dmin);
    float* y = out + b * kQKK;
    const std::uint8_t* q = x.qs;
    for (int s = 0; s < 8; s += 2, q += 32, y += 64) {
      std::uint8_t sc, m;
      scale_min_k4(s, x.scales, sc, m);
      const float d1 = d * sc, m1 = dmin * m;
      scale_min_k4(s + 1, x.scales, sc, m);
      const float d2 = d * sc, m2 = dmin * m;
      const std::uint8_t u1 = static_cast<std::uint8_t>(1u << s), u2 = static_cast<std::uint8_t>(2u << s);
      for (int l = 0; l < 32; ++l)
        y[l] = d1 * static_cast<float>((q[l] & 0xF) + ((x.qh[l] & u1) ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l)
        y[32 + l] = d2 * static_cast<float>((q[l] >> 4) + ((x.qh[l] & u2) ? 16 : 0)) - m2;
    }
  }
}

void dequantize_q6_k(const void* blocks, float* out, std::int64_t n) {
  for (std::int64_t b = 0; b < n / kQKK; ++b) {
    const auto x = load_block<BlockQ6_K>(blocks, b);
    const float d = h(x.d);
    float* y = out + b * kQKK;
    const std::uint8_t* ql = x.ql;
    const std::uint8_t* qh = x.qh;
    const std::int8_t* sc = x.scales;
    for (int half = 0; half < 2; ++half, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
        y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
        y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
        y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
      }
    }
  }
}

void dequantize_f16(const void* src, float* out, std::int64_t n) {
  const auto* p = static_cast<const unsigned char*>(src);
  const float* table = f16_table();
  for (std::int64_t i = 0; i < n; ++i) {
    std::uint16_t v;
    std::memcpy(&v, p + 2 * i, 2);
    out[i] = table[v];
  }
}

void dequantize_bf16(const void* src, float* out, std::int64_t n) {
  const auto* p = static_cast<const unsigned char*>(src);
  for (std::int64_t i = 0; i < n; ++i) {
    std::uint16_t v;
    std::memcpy(&v, p + 2 * i, 2);
    const std::uint32_t bits = static_cast<std::uint32_t>(v) << 16;  // bf16 is a float's top half
    std::memcpy(out + i, &bits, 4);
  }
}

void quantize_q8_0(const float* x, void* blocks, std::int64_t n) {
  auto* dst = static_cast<unsigned char*>(blocks);
  for (std::int64_t b = 0; b < n / kQK; ++b) {
    const float* v = x + b * kQK;
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::fmax(amax, std::fabs(v[j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ8_0 out;
    out.d = f32_to_f16(d);
    for (int j = 0; j < kQK; ++j) out.qs[j] = static_cast<std::int8_t>(std::round(v[j] * id));  // half away from zero
    std::memcpy(dst + static_cast<std::size_t>(b) * sizeof(BlockQ8_0), &out, sizeof(out));
  }
}

}  // namespace tfm::kernels
