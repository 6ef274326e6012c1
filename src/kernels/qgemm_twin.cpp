// Activation quantization and the scalar twin of the fast compact-weight kernels: the same
// integer arithmetic as qgemm_avx2.cpp / qgemm_avx512.cpp (int8 activations, integer dots per
// block, one float multiply-add per block), one term at a time in index order. It is the
// generic-ISA kernel and the reference the fast builds are tested against; qgemm_naive (f32
// dequantized weights, f32 activations) stays the reference for the whole approximation.
#include <cmath>
#include <cstring>

#include "kernels/gemm_bf16.h"
#include "kernels/qgemm_act.h"
#include "kernels/quant_blocks.h"
#include "tfm/error.h"

namespace tfm::kernels::qgemm_detail {
namespace {

float h2f(const unsigned char* p) {
  std::uint16_t v;
  std::memcpy(&v, p, 2);
  return f16_to_f32(v);
}

// The 8 six-bit scales and mins of a Q4_K block from its 12 packed bytes.
void unpack_k4_scales(const std::uint8_t* q, std::uint8_t* sc, std::uint8_t* mn) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = q[j] & 63;
    mn[j] = q[j + 4] & 63;
    sc[j + 4] = static_cast<std::uint8_t>((q[j + 8] & 0xF) | ((q[j] >> 6) << 4));
    mn[j + 4] = static_cast<std::uint8_t>((q[j + 8] >> 4) | ((q[j + 4] >> 6) << 4));
  }
}

float dot_q8_0(const unsigned char* w, std::int64_t K, const std::int8_t* xq, const float* dx) {
  float acc = 0.0f;
  for (std::int64_t b = 0; b < K / 32; ++b, w += sizeof(BlockQ8_0)) {
    const auto* qs = reinterpret_cast<const std::int8_t*>(w + 2);
    std::int32_t s = 0;
    for (int j = 0; j < 32; ++j) s += qs[j] * xq[32 * b + j];
    acc += static_cast<float>(s) * (h2f(w) * dx[b]);
  }
  return acc;
}

float dot_q4_0(const unsigned char* w, std::int64_t K, const std::int8_t* xq, const float* dx,
               const std::int16_t* s32) {
  float acc = 0.0f;
  for (std::int64_t b = 0; b < K / 32; ++b, w += sizeof(BlockQ4_0)) {
    const unsigned char* qs = w + 2;
    std::int32_t s = -8 * s32[b];  // weights are nibble - 8: the offset times Σ x
    for (int j = 0; j < 16; ++j) s += (qs[j] & 0xF) * xq[32 * b + j] + (qs[j] >> 4) * xq[32 * b + 16 + j];
    acc += static_cast<float>(s) * (h2f(w) * dx[b]);
  }
  return acc;
}

float dot_q4_k(const unsigned char* w, std::int64_t K, const std::int8_t* xq, const float* dx,
               const std::int16_t* s32) {
  float acc = 0.0f;
  for (std::int64_t b = 0; b < K / 256; ++b, w += sizeof(BlockQ4_K)) {
    std::uint8_t sc[8], mn[8];
    unpack_k4_scales(w + 4, sc, mn);
    const unsigned char* qs = w + 16;
    const std::int8_t* x = xq + 256 * b;
    std::int32_t isc = 0, imin = 0;
    for (int c = 0; c < 4; ++c) {  // 32 bytes: sub-block 2c in the low nibbles, 2c + 1 in the high
      std::int32_t lo = 0, hi = 0;
      for (int l = 0; l < 32; ++l) {
        lo += (qs[32 * c + l] & 0xF) * x[64 * c + l];
        hi += (qs[32 * c + l] >> 4) * x[64 * c + 32 + l];
      }
      isc += sc[2 * c] * lo + sc[2 * c + 1] * hi;
    }
    for (int s = 0; s < 8; ++s) imin += mn[s] * s32[8 * b + s];
    acc += (h2f(w) * dx[b]) * static_cast<float>(isc) - (h2f(w + 2) * dx[b]) * static_cast<float>(imin);
  }
  return acc;
}

float dot_q6_k(const unsigned char* w, std::int64_t K, const std::int8_t* xq, const float* dx,
               const std::int16_t* s16) {
  float acc = 0.0f;
  for (std::int64_t b = 0; b < K / 256; ++b, w += sizeof(BlockQ6_K)) {
    const unsigned char* ql = w;
    const unsigned char* qh = w + 128;
    const auto* sc = reinterpret_cast<const std::int8_t*>(w + 192);
    const std::int8_t* x = xq + 256 * b;
    std::int32_t sub[16] = {};
    for (int half = 0; half < 2; ++half)
      for (int l = 0; l < 32; ++l) {
        const unsigned char a = ql[64 * half + l], c = ql[64 * half + 32 + l], hb = qh[32 * half + l];
        const int e = 128 * half + l;
        sub[e / 16] += ((a & 0xF) | ((hb & 3) << 4)) * x[e];
        sub[(e + 32) / 16] += ((c & 0xF) | (((hb >> 2) & 3) << 4)) * x[e + 32];
        sub[(e + 64) / 16] += ((a >> 4) | (((hb >> 4) & 3) << 4)) * x[e + 64];
        sub[(e + 96) / 16] += ((c >> 4) | (((hb >> 6) & 3) << 4)) * x[e + 96];
      }
    std::int32_t isum = 0;
    for (int s = 0; s < 16; ++s) isum += sc[s] * (sub[s] - 32 * s16[16 * b + s]);  // q6 - 32
    acc += (h2f(w + 208) * dx[b]) * static_cast<float>(isum);
  }
  return acc;
}

// bf16 weights multiply the activations rounded to bf16 (qgemm_bf16.h); f16 the f32 ones.
float dot_half(DType t, const unsigned char* w, std::int64_t K, const float* x) {
  float acc = 0.0f;
  for (std::int64_t k = 0; k < K; ++k) {
    std::uint16_t v;
    std::memcpy(&v, w + 2 * k, 2);
    acc += t == DType::bf16 ? round_bf16(x[k]) * bf16_to_f32(v) : x[k] * f16_to_f32(v);
  }
  return acc;
}

}  // namespace

std::int64_t act_block(DType wtype) {
  switch (wtype) {
    case DType::q8_0: case DType::q4_0: case DType::q4_0x16: case DType::q8_0x16: return 32;
    case DType::q4_k: case DType::q6_k: case DType::q4_kx16: case DType::q6_kx16: return 256;
    default: return 0;
  }
}

void size_acts(DType wtype, std::int64_t M, std::int64_t K, QuantizedActs& out) {
  const std::int64_t block = act_block(wtype);
  out.rows = M;
  out.K = K;
  out.block = block;
  out.blocks_per_row = block == 0 ? 0 : K / block;
  if (block == 0) return;
  out.q.resize(static_cast<std::size_t>(M * K));
  out.d.resize(static_cast<std::size_t>(M * (K / block)));
  out.sum32.resize(static_cast<std::size_t>(M * (K / 32)));
  out.bsum16.resize(block == 256 ? static_cast<std::size_t>(M * (K / 16)) : 0);
}

void block_sums(QuantizedActs& a, std::int64_t m) {
  const std::int64_t K = a.K;
  const std::int8_t* q = a.qrow(m);
  for (std::int64_t g = 0; g < K / 32; ++g) {
    int s = 0;
    for (int j = 0; j < 32; ++j) s += q[32 * g + j];
    a.sum32[static_cast<std::size_t>(m * (K / 32) + g)] = static_cast<std::int16_t>(s);
  }
  if (a.block == 256)
    for (std::int64_t g = 0; g < K / 16; ++g) {
      int s = 0;
      for (int j = 0; j < 16; ++j) s += q[16 * g + j];
      a.bsum16[static_cast<std::size_t>(m * (K / 16) + g)] = static_cast<std::int16_t>(s);
    }
}

void quantize_acts(DType wtype, std::int64_t M, std::int64_t K, const float* x, std::int64_t ldx, QuantizedActs& out) {
  size_acts(wtype, M, K, out);
  const std::int64_t block = out.block;
  if (block == 0) return;
  for (std::int64_t m = 0; m < M; ++m) {
    const float* xm = x + m * ldx;
    std::int8_t* q = out.q.data() + m * K;
    for (std::int64_t b = 0; b < K / block; ++b) {
      float amax = 0.0f;
      for (std::int64_t j = 0; j < block; ++j) amax = std::fmax(amax, std::fabs(xm[b * block + j]));
      const float d = amax / 127.0f;
      const float id = d != 0.0f ? 1.0f / d : 0.0f;
      out.d[static_cast<std::size_t>(m * (K / block) + b)] = d;
      for (std::int64_t j = 0; j < block; ++j)
        q[b * block + j] = static_cast<std::int8_t>(std::nearbyint(xm[b * block + j] * id));
    }
    block_sums(out, m);
  }
}

void rows_twin(DType wtype, std::int64_t M, std::int64_t n0, std::int64_t n1, std::int64_t K, const float* x,
               std::int64_t ldx, const QuantizedActs& acts, const void* w, std::size_t row_bytes, float* y,
               std::int64_t ldy) {
  for (std::int64_t n = n0; n < n1; ++n) {
    const auto* wr = static_cast<const unsigned char*>(w) + static_cast<std::size_t>(n) * row_bytes;
    for (std::int64_t m = 0; m < M; ++m) {
      float v;
      switch (wtype) {
        case DType::q8_0: v = dot_q8_0(wr, K, acts.qrow(m), acts.drow(m)); break;
        case DType::q4_0: v = dot_q4_0(wr, K, acts.qrow(m), acts.drow(m), acts.s32row(m)); break;
        case DType::q4_k: v = dot_q4_k(wr, K, acts.qrow(m), acts.drow(m), acts.s32row(m)); break;
        case DType::q6_k: v = dot_q6_k(wr, K, acts.qrow(m), acts.drow(m), acts.s16row(m)); break;
        case DType::bf16: case DType::f16: v = dot_half(wtype, wr, K, x + m * ldx); break;
        default: fail("qgemm", "weights of type ", dtype_name(wtype), " have no integer kernel");
      }
      y[m * ldy + n] = v;
    }
  }
}

}  // namespace tfm::kernels::qgemm_detail
