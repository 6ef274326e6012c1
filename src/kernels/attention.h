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
//
// Sparse patterns (Longformer, Beltagy et al. 2020; BigBird, Zaheer et al. 2020) widen the
// window part, never the causal / padding part:
//   allowed(b,h,i,j) = base(b,i,j) and (local(i',j) or global(i') or global(j) or random(h,i',j))
//   base    = causal (j <= i') and padding (j < valid_len(b,i))
//   local   = |i' - j| < w (w = 0: every key, so a pattern without a window is dense)
//   global  = the position is in the sorted list global_pos (on the key axis)
//   random  = j / bs is one of the random key blocks of query block i' / bs for head h
//             (attention_random_key_blocks: a pure function of (seed, h, query block,
//             number of real keys))
// A row's allowed keys are then a few sorted spans (attention_key_spans): the fused kernels
// visit only the key blocks those spans touch, and the sparse plain path stores only them.
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
  // bf16 mixed precision, fused kernels only: every product's operands rounded to bf16, fp32
  // sums (attention_flash_products.h); softmax, scaling and the outputs stay fp32.
  bool bf16 = false;
  std::uint64_t dropout_seed = 0;
  std::uint64_t dropout_batch_offset = 0;  // batch row b draws the mask of row b + this
  // Tensor parallelism: head h of this call is head h + head_offset of the model's heads_total
  // (0: Hq), so what is drawn per head (dropout masks, random blocks) matches one process.
  std::int64_t head_offset = 0, heads_total = 0;
  // ---- sparse pattern (see above) ----
  const std::int64_t* global_pos = nullptr;  // (n_global) sorted, distinct, in [0, Tk)
  std::int64_t n_global = 0;
  std::int64_t random_blocks = 0;            // r random key blocks per query block
  std::int64_t block_size = 0;               // bs, > 0 when random_blocks > 0
  std::uint64_t random_seed = 0;

  bool sparse() const { return n_global > 0 || random_blocks > 0; }

  std::int64_t group() const { return Hq / Hkv; }
  std::int64_t model_heads() const { return heads_total > 0 ? heads_total : Hq; }
  std::int64_t shift() const { return Tk - Tq; }  // i' = i + shift (queries aligned to the end)
};

// The dropout counter of weight (b, h, i, 0): the row-major index in the whole batch's, and the
// whole model's, (B, H, Tq, Tk) weights.
inline std::uint64_t attention_dropout_index(const AttentionParams& p, std::int64_t b, std::int64_t h, std::int64_t i) {
  const auto bb = static_cast<std::int64_t>(p.dropout_batch_offset) + b;
  return static_cast<std::uint64_t>(((bb * p.model_heads() + p.head_offset + h) * p.Tq + i) * p.Tk);
}

// Allowed key interval [lo, hi) of query row i in batch b (lo >= hi: fully masked row).
void attention_key_range(const AttentionParams& p, std::int64_t b, std::int64_t i, std::int64_t* lo, std::int64_t* hi);

// ---- sparse patterns -------------------------------------------------------------------
// The random key blocks of query block qblock (= i' / bs) for head h: min(r, candidates)
// distinct blocks, sorted, drawn uniformly among the blocks holding real keys, 0 .. nb-1 with
// nb = ceil(key_end / bs) (key_end = min(Tk, the row's valid length): padding never changes
// the draw), or 0 .. min(qblock, nb-1) under a causal mask. Written to out (r entries);
// returns the count. Generator: splitmix64 seeded with splitmix64(seed) ^ (h << 32 | qblock),
// Floyd's sampling (docs/sparse_attention.md states it exactly; ref_attention.py mirrors it).
std::int64_t attention_random_key_blocks(const AttentionParams& p, std::int64_t h, std::int64_t qblock,
                                         std::int64_t key_end, std::int64_t* out);
// Is key position j one of the global positions?
bool attention_is_global(const AttentionParams& p, std::int64_t j);
// Most spans attention_key_spans can return for any row of p.
std::int64_t attention_max_spans(const AttentionParams& p);
// The allowed keys of row i (batch b, head h) as sorted, disjoint, non-adjacent spans
// [lo[s], hi[s]); returns their count (0: fully masked row). Without a sparse pattern this is
// attention_key_range's interval.
std::int64_t attention_key_spans(const AttentionParams& p, std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t* lo,
                                 std::int64_t* hi);

// The spans of kBr consecutive rows and the key blocks (of bc keys) their union touches — the
// fused kernels' iteration plan for one query block. Methods live in attention.cpp (built for
// the baseline ISA) so no std:: template is instantiated inside the per-ISA files.
class QueryBlockSpans {
 public:
  QueryBlockSpans(const AttentionParams& p, std::int64_t rows, std::int64_t bc);
  ~QueryBlockSpans();
  QueryBlockSpans(const QueryBlockSpans&) = delete;
  QueryBlockSpans& operator=(const QueryBlockSpans&) = delete;
  void fill(std::int64_t b, std::int64_t h, std::int64_t i0, std::int64_t nr);
  // Spans of row r: lo(r)[0..count(r)), hi(r)[...].
  std::int64_t count(std::int64_t r) const { return count_[r]; }
  const std::int64_t* lo(std::int64_t r) const { return lo_ + r * max_spans_; }
  const std::int64_t* hi(std::int64_t r) const { return hi_ + r * max_spans_; }
  // Key blocks to visit, ascending: blocks()[0 .. n_blocks()).
  std::int64_t n_blocks() const { return n_blocks_; }
  const std::int64_t* blocks() const { return blocks_; }

 private:
  const AttentionParams& p_;
  std::int64_t rows_, bc_, max_spans_;
  std::int64_t *lo_, *hi_, *count_, *blocks_, *scratch_;
  std::int64_t n_blocks_ = 0;
};

// Which query blocks visit each key block (the inverse of QueryBlockSpans' lists over every
// (b, h, query block)), for the backward pass that owns a key block. Size: the number of
// visited (query block, key block) pairs, i.e. proportional to the work, not to T^2.
class KeyBlockVisitors {
 public:
  KeyBlockVisitors(const AttentionParams& p, std::int64_t br, std::int64_t bc);
  ~KeyBlockVisitors();
  KeyBlockVisitors(const KeyBlockVisitors&) = delete;
  KeyBlockVisitors& operator=(const KeyBlockVisitors&) = delete;
  // Visitors of key block kb of (b, kv head hk): entries h * nqb + qb, ascending.
  std::int64_t count(std::int64_t b, std::int64_t hk, std::int64_t kb) const;
  const std::int64_t* items(std::int64_t b, std::int64_t hk, std::int64_t kb) const;

 private:
  std::int64_t nkb_, Hkv_;
  std::int64_t *ptr_, *items_;
};

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

// ---- sparse plain path: like the naive twin, but each row stores only its allowed keys --
// Rows are (b, h, i) flattened; row r's weights are probs[row_ptr[r] .. row_ptr[r+1]) in the
// order of its spans. attention_sparse_row_ptr fills row_ptr (B*Hq*Tq + 1) and returns nnz.
std::int64_t attention_sparse_row_ptr(const AttentionParams& p, std::int64_t* row_ptr);
void attention_sparse_naive_forward(const AttentionParams& p, HeadsView q, HeadsView k, HeadsView v,
                                    const std::int64_t* row_ptr, float* out, float* probs);
// ds (nnz) workspace; dbias: null, or (B, Hq, Tq, Tk) zero-filled, receives d loss / d scores.
void attention_sparse_naive_backward(const AttentionParams& p, HeadsView q, HeadsView k, HeadsView v,
                                     const std::int64_t* row_ptr, const float* probs, const float* dout, float* dq,
                                     float* dk, float* dv, float* ds, float* dbias);
// Scatter packed weights into a dense (B, Hq, Tq, Tk) zero-filled matrix (inspection only).
void attention_sparse_unpack(const AttentionParams& p, const std::int64_t* row_ptr, const float* probs, float* dense);

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
