// Scaled dot-product attention kernels: the naive twin (materialises the T x T scores) and
// the fused FlashAttention-2 style kernels (online softmax over key blocks, O(block) memory).
//
// Glossary: B batch, Hq query heads, Hkv key/value heads (Hq % Hkv == 0; query head h reads
// kv head h / (Hq/Hkv)), Tq queries, Tk keys, D head dim.
//
//   s[b,h,i,j] = scale * q[b,h,i]·k[b,h/G,j] + bias[b,h,i,j] - slope[h] * |i' - j|
//                (-inf where the mask forbids j for query i), i' = i + Tk - Tq
//   a[b,h,i,:] = softmax(s[b,h,i,:])       (all zeros for a fully masked row)
//   z          = a * dropout_keep / (1-p)  (Philox decision per element index)
//   out[b,h,i] = sum_j z[b,h,i,j] v[b,h/G,j]
//
// The allowed keys of a row are one interval [lo, hi): causal caps hi at i'+1, a sliding
// window of width w gives i'-w < j <= i', and valid lengths cap hi at valid_len(b,i). The
// fused kernels use that to skip whole key blocks; the naive twin tests each element.
#pragma once

#include <cstdint>
#include <vector>

namespace tfm::kernels {

// A (B, H, T, D) fp32 tensor with unit stride along D and arbitrary strides (in elements)
// along b, h and t — so a (B, T, H, D) projection viewed as (B, H, T, D) needs no copy.
struct HeadsView {
  const float* data = nullptr;
  std::int64_t sb = 0, sh = 0, st = 0;
  const float* row(std::int64_t b, std::int64_t h, std::int64_t t) const { return data + b * sb + h * sh + t * st; }
};

struct AttentionParams {
  std::int64_t B = 0, Hq = 0, Hkv = 0, Tq = 0, Tk = 0, D = 0;
  float scale = 1.0f;
  // ---- mask spec (all combinable) ----
  bool causal = false;
  std::int64_t window = 0;  // > 0: sliding window width
  // valid_len(b, i) = valid_lens[b * vl_sb + i * vl_si] (vl_si = 0 for per-batch lengths).
  const std::int64_t* valid_lens = nullptr;
  std::int64_t vl_sb = 0, vl_si = 0;
  // Additive bias broadcast to (B, Hq, Tq, Tk): strides are 0 along broadcast dims.
  const float* bias = nullptr;
  std::int64_t bias_sb = 0, bias_sh = 0, bias_si = 0, bias_sj = 0;
  const float* alibi_slopes = nullptr;  // (Hq): adds -slope[h] * |i' - j|, computed on the fly
  float dropout_p = 0.0f;               // in [0, 1)
  std::uint64_t dropout_seed = 0;

  std::int64_t group() const { return Hq / Hkv; }
  std::int64_t shift() const { return Tk - Tq; }  // i' = i + shift (queries aligned to the end)
};

// Allowed key interval [lo, hi) of query row i in batch b (lo >= hi: fully masked row).
void attention_key_range(const AttentionParams& p, std::int64_t b, std::int64_t i, std::int64_t* lo, std::int64_t* hi);

// Dropout scales of the n elements whose flat index (((b*Hq + h)*Tq + i)*Tk + j) starts at
// `first`: 0 for a dropped element, 1/(1-p) for a kept one. A pure function of (seed, index):
// the naive and fused kernels, any block size and any thread count agree.
void attention_dropout_scales(std::uint64_t seed, float p, std::uint64_t first, std::int64_t n, float* out);

// ALiBi slopes for n heads (Press et al. 2022): 2^(-8h/n), h = 1..n, for n a power of two;
// otherwise those of the largest power of two m < n, then every other slope of 2m heads.
std::vector<float> alibi_slopes(std::int64_t n_heads);

// ---- naive twin: plain loops over the materialised (B, Hq, Tq, Tk) matrices ------------
// probs (B, Hq, Tq, Tk) receives the softmax weights before dropout (kept for backward and
// for inspection); out (B, Hq, Tq, D) contiguous.
void attention_naive_forward(const AttentionParams& p, HeadsView q, HeadsView k, HeadsView v, float* out,
                             float* probs);
// From the saved probs and dout (B, Hq, Tq, D) contiguous: dq (B, Hq, Tq, D), dk, dv
// (B, Hkv, Tk, D) contiguous, overwritten. ds (B, Hq, Tq, Tk) is workspace that receives
// d loss / d scores (= the gradient of a full-shape bias).
void attention_naive_backward(const AttentionParams& p, HeadsView q, HeadsView k, HeadsView v,
                              const float* probs, const float* dout, float* dq, float* dk, float* dv, float* ds);

// ---- fused (FlashAttention-2) ----------------------------------------------------------
// out (B, Hq, Tq, D) and lse (B, Hq, Tq) contiguous; lse = log sum_j exp(s_ij), -inf for a
// fully masked row. Dispatches on tfm::active_isa().
void attention_flash_forward(const AttentionParams& p, HeadsView q, HeadsView k, HeadsView v, float* out,
                             float* lse);
// Recomputes the scores blockwise from lse. out, dout (B, Hq, Tq, D) contiguous; dq, dk, dv
// as in the naive backward. dbias: null, or (B, Hq, Tq, Tk) zero-filled by the caller,
// receives d loss / d scores (written only inside visited key blocks).
void attention_flash_backward(const AttentionParams& p, HeadsView q, HeadsView k, HeadsView v, const float* out,
                              const float* lse, const float* dout, float* dq, float* dk, float* dv, float* dbias);

}  // namespace tfm::kernels
