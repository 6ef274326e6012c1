// Reference quantizers for Q4_0, Q4_K and Q6_K: the algorithms of ggml's
// quantize_row_q4_0_ref, quantize_row_q4_K_ref (make_qkx2_quants per 32-weight sub-block) and
// quantize_row_q6_K_ref (make_qx_quants per 16-weight sub-block), written from their
// definitions so the bytes we write are the bytes llama.cpp's reference writes for the same
// floats. Every expression keeps ggml's float evaluation order (this file is compiled for the
// baseline x86-64, so no FMA contraction changes a rounding); tests compare the bytes with a
// numpy transcription (tools/reference/gguf_convention.py).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/quant_blocks.h"
#include "tfm/dtype.h"

namespace tfm::kernels {
namespace {

constexpr float kGroupMaxEps = 1e-15f;

// ggml's nearest_int: round half to even (the magic-number trick equals rint for the
// |v| < 2^22 it is used on).
int nearest_int(float v) { return static_cast<int>(std::nearbyint(v)); }

float h2f(std::uint16_t v) { return f16_to_f32(v); }

// Asymmetric fit of n weights to L in [0, nmax] with x ≈ scale * L - the_min, searching
// nstep + 1 candidate scales and keeping the one with the least weighted squared error
// (ggml's make_qkx2_quants with use_mad = false).
float fit_scale_min(int n, int nmax, const float* x, const float* weights, std::uint8_t* L, float* the_min,
                    std::uint8_t* Laux, float rmin, float rdelta, int nstep) {
  float min = x[0], max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.0f;
  }
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = nearest_int(iscale * (x[i] - min));
    L[i] = static_cast<std::uint8_t>(std::max(0, std::min(nmax, l)));
    float diff = scale * static_cast<float>(L[i]) + min - x[i];
    diff = diff * diff;
    best_error += weights[i] * diff;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * (x[i] - min));
      l = std::max(0, std::min(nmax, l));
      Laux[i] = static_cast<std::uint8_t>(l);
      const float w = weights[i];
      const float lf = static_cast<float>(l);
      sum_l += w * lf;
      sum_l2 += w * lf * lf;
      sum_xl += w * lf * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * static_cast<float>(Laux[i]) + this_min - x[i];
        diff = diff * diff;
        cur_error += weights[i] * diff;
      }
      if (cur_error < best_error) {
        for (int i = 0; i < n; ++i) L[i] = Laux[i];
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

// Symmetric fit of n weights to L - nmax, L in [0, 2 nmax), weighted by x² (ggml's
// make_qx_quants with rmse_type 1 and no importance weights): 19 candidate scales around
// -nmax / max, keeping the one with the largest sumlx² / suml2.
float fit_scale_symmetric(int n, int nmax, const float* x, std::int8_t* L) {
  float max = 0, amax = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) {
      amax = ax;
      max = x[i];
    }
  }
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.0f;
  }
  const float fnmax = static_cast<float>(nmax);
  float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < n; ++i) {
    int l = nearest_int(iscale * x[i]);
    l = std::max(-nmax, std::min(nmax - 1, l));
    L[i] = static_cast<std::int8_t>(l + nmax);
    const float w = x[i] * x[i];
    const float lf = static_cast<float>(l);
    sumlx += w * x[i] * lf;
    suml2 += w * lf * lf;
  }
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(fnmax + 0.1f * static_cast<float>(is)) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      int l = nearest_int(iscale * x[i]);
      l = std::max(-nmax, std::min(nmax - 1, l));
      const float w = x[i] * x[i];
      const float lf = static_cast<float>(l);
      sumlx += w * x[i] * lf;
      suml2 += w * lf * lf;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        const int l = nearest_int(iscale * x[i]);
        L[i] = static_cast<std::int8_t>(nmax + std::max(-nmax, std::min(nmax - 1, l)));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

template <class Block>
void store_block(void* blocks, std::int64_t i, const Block& b) {
  std::memcpy(static_cast<unsigned char*>(blocks) + static_cast<std::size_t>(i) * sizeof(Block), &b, sizeof(Block));
}

}  // namespace

void quantize_q4_0(const float* x, void* blocks, std::int64_t n) {
  for (std::int64_t b = 0; b < n / kQK; ++b) {
    const float* v = x + b * kQK;
    float amax = 0.0f, max = 0.0f;  // the signed value of largest magnitude
    for (int j = 0; j < kQK; ++j)
      if (amax < std::fabs(v[j])) {
        amax = std::fabs(v[j]);
        max = v[j];
      }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    BlockQ4_0 out;
    out.d = f32_to_f16(d);
    for (int j = 0; j < kQK / 2; ++j) {
      const float x0 = v[j] * id, x1 = v[j + kQK / 2] * id;
      // ggml truncates x + 8.5 toward zero through int8 (x >= -8 up to rounding)
      const int q0 = std::min(15, static_cast<int>(static_cast<std::int8_t>(x0 + 8.5f)));
      const int q1 = std::min(15, static_cast<int>(static_cast<std::int8_t>(x1 + 8.5f)));
      out.qs[j] = static_cast<std::uint8_t>((q0 & 0xFF) | ((q1 & 0xFF) << 4));
    }
    store_block(blocks, b, out);
  }
}

void quantize_q4_k(const float* x, void* blocks, std::int64_t n) {
  std::uint8_t L[kQKK], Laux[32];
  float mins[8], scales[8], weights[32];
  for (std::int64_t b = 0; b < n / kQKK; ++b, x += kQKK) {
    BlockQ4_K out{};
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) {
      float sum_x2 = 0;
      for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
      const float av_x = std::sqrt(sum_x2 / 32);
      for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
      scales[j] = fit_scale_min(32, 15, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, -1.0f, 0.1f, 20);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    const float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    for (int j = 0; j < 8; ++j) {
      // as ggml: the int lands in a uint8_t (wrapping) before the clamp to 63
      const auto ls = static_cast<std::uint8_t>(std::min<int>(63, static_cast<std::uint8_t>(nearest_int(inv_scale * scales[j]))));
      const auto lm = static_cast<std::uint8_t>(std::min<int>(63, static_cast<std::uint8_t>(nearest_int(inv_min * mins[j]))));
      if (j < 4) {
        out.scales[j] = ls;
        out.scales[j + 4] = lm;
      } else {
        out.scales[j + 4] = static_cast<std::uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
        out.scales[j - 4] = static_cast<std::uint8_t>(out.scales[j - 4] | ((ls >> 4) << 6));
        out.scales[j] = static_cast<std::uint8_t>(out.scales[j] | ((lm >> 4) << 6));
      }
    }
    out.d = f32_to_f16(max_scale / 63.0f);
    out.dmin = f32_to_f16(max_min / 63.0f);
    for (int j = 0; j < 8; ++j) {
      std::uint8_t sc, m;
      scale_min_k4(j, out.scales, sc, m);
      const float d = h2f(out.d) * static_cast<float>(sc);
      if (d == 0.0f) continue;  // the sub-block keeps the levels of its fit
      const float dm = h2f(out.dmin) * static_cast<float>(m);
      for (int i = 0; i < 32; ++i) {
        const int l = nearest_int((x[32 * j + i] + dm) / d);
        L[32 * j + i] = static_cast<std::uint8_t>(std::max(0, std::min(15, l)));
      }
    }
    std::uint8_t* q = out.qs;
    for (int j = 0; j < kQKK; j += 64, q += 32)
      for (int l = 0; l < 32; ++l) q[l] = static_cast<std::uint8_t>(L[j + l] | (L[j + l + 32] << 4));
    store_block(blocks, b, out);
  }
}

void quantize_q6_k(const float* x, void* blocks, std::int64_t n) {
  std::int8_t L[kQKK];
  float scales[16];
  for (std::int64_t b = 0; b < n / kQKK; ++b, x += kQKK) {
    BlockQ6_K out{};
    float max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < 16; ++ib) {
      const float scale = fit_scale_symmetric(16, 32, x + 16 * ib, L + 16 * ib);
      scales[ib] = scale;
      if (std::fabs(scale) > max_abs_scale) {
        max_abs_scale = std::fabs(scale);
        max_scale = scale;
      }
    }
    if (max_abs_scale < kGroupMaxEps) {  // an all-zero block: every byte 0
      store_block(blocks, b, out);
      continue;
    }
    const float iscale = -128.0f / max_scale;
    out.d = f32_to_f16(1 / iscale);
    for (int ib = 0; ib < 16; ++ib) out.scales[ib] = static_cast<std::int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
    for (int j = 0; j < 16; ++j) {
      const float d = h2f(out.d) * static_cast<float>(out.scales[j]);
      if (d == 0.0f) continue;
      for (int i = 0; i < 16; ++i) {
        const int l = nearest_int(x[16 * j + i] / d);
        L[16 * j + i] = static_cast<std::int8_t>(std::max(-32, std::min(31, l)) + 32);
      }
    }
    std::uint8_t* ql = out.ql;
    std::uint8_t* qh = out.qh;
    for (int j = 0; j < kQKK; j += 128, ql += 64, qh += 32)
      for (int l = 0; l < 32; ++l) {
        const int q1 = L[j + l] & 0xF, q2 = L[j + l + 32] & 0xF, q3 = L[j + l + 64] & 0xF, q4 = L[j + l + 96] & 0xF;
        ql[l] = static_cast<std::uint8_t>(q1 | (q3 << 4));
        ql[l + 32] = static_cast<std::uint8_t>(q2 | (q4 << 4));
        qh[l] = static_cast<std::uint8_t>((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                                          ((L[j + l + 96] >> 4) << 6));
      }
    store_block(blocks, b, out);
  }
}

}  // namespace tfm::kernels
