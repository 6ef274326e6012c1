// The fused attention kernels (FlashAttention-2, Dao 2023), written once as templates over
// simd::Vec<Isa>. Included only by attention_flash.cpp (generic + dispatch) and the
// *_avx2.cpp / *_avx512.cpp files that instantiate it; everything here is a template on the ISA tag (or has internal linkage)
// so no copy compiled with wide flags can leak to baseline callers.
//
// Forward, per (b, h, query block of kBr rows):  for each key block of kBc keys that some
// row may see (QueryBlockSpans: with a sparse pattern, only the blocks its spans touch): S = (scale q) k^T, add bias / ALiBi / mask, then the online softmax
//   m' = max(m, max_j s_j);  l' = e^(m-m') l + sum_j e^(s_j-m');  O' = e^(m-m') O + e^(s-m') v
// and at the end out = O / l, lse = m + log l. Only kBr x kBc scores exist at a time; the
// extra memory is O(T·D): k (and v for backward) transposed once into key blocks.
//
// Backward recomputes P = exp(S - lse) blockwise. With Di = dout_i·out_i (= sum_j z_ij dz_ij):
//   dS = P * (keep * (dout v^T) - Di),  dq = scale dS k,  dk = scale dS^T q,  dv = z^T dout.
// FlashAttention-2 accumulates dq with atomics; to stay race-free and bit-reproducible we run
// two passes instead: one owns a key block (dk, dv over all rows that see it), one owns a
// query block (dq). That recomputes S and dP once more, in exchange for determinism.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>

#include "base/memory.h"
#include "kernels/attention.h"
#include "kernels/parallel.h"
#include "kernels/simd/math.h"
#include "kernels/simd/transpose.h"

namespace tfm::kernels::flash {

constexpr std::int64_t kBr = 64;  // query rows per block
constexpr std::int64_t kBc = 64;  // keys per block (a multiple of every vector width)
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

namespace {  // not templates: internal linkage keeps each ISA's copy to itself
// std::fill / std::copy would be instantiated under the same names in every ISA's file, and
// the linker may keep an AVX-512 copy for baseline callers; these have internal linkage.
void set_all(float* x, std::int64_t n, float value) {
  for (std::int64_t i = 0; i < n; ++i) x[i] = value;
}
void copy_n(const float* src, std::int64_t n, float* dst) {
  for (std::int64_t i = 0; i < n; ++i) dst[i] = src[i];
}
const float* row_of(const HeadsView& x, std::int64_t b, std::int64_t h, std::int64_t t) {
  return x.data + b * x.sb + h * x.sh + t * x.st;
}
std::int64_t round_up(std::int64_t n, std::int64_t m) { return (n + m - 1) / m * m; }

}  // namespace

// Per-ISA entry points (attention_flash_{avx2,avx512}.cpp; the generic ones in attention_flash.cpp).
#define TFM_ATTENTION_FLASH_DECLARE(suffix)                                                                \
  void forward_##suffix(const AttentionParams& p, HeadsView q, HeadsView k, HeadsView v, float* out,        \
                        float* lse);                                                                       \
  void backward_##suffix(const AttentionParams& p, HeadsView q, HeadsView k, HeadsView v, const float* out, \
                         const float* lse, const float* dout, float* dq, float* dk, float* dv, float* dbias);
TFM_ATTENTION_FLASH_DECLARE(generic)
TFM_ATTENTION_FLASH_DECLARE(avx2)
TFM_ATTENTION_FLASH_DECLARE(avx512)
TFM_ATTENTION_FLASH_DECLARE(avx512bf16)  // bf16 products with VDPBF16PS (attention_flash_bf16_avx512.cpp)
#undef TFM_ATTENTION_FLASH_DECLARE

// Scratch floats from the engine's counted allocator, so memory_stats() sees the kernel's
// working set too (the benchmark reports peak memory).
template <class Isa>
class Scratch {
 public:
  explicit Scratch(std::int64_t n)
      : n_(static_cast<std::size_t>(std::max<std::int64_t>(n, 1))),
        p_(static_cast<float*>(base::allocate(n_ * sizeof(float)))) {
    for (std::size_t i = 0; i < n_; ++i) p_[i] = 0.0f;
  }
  ~Scratch() { base::release(p_, n_ * sizeof(float)); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  float* get() const { return p_; }

 private:
  std::size_t n_;
  float* p_;
};

}  // namespace tfm::kernels::flash

#include "kernels/attention_flash_products.h"

namespace tfm::kernels::flash {

// ---- register-blocked micro-GEMM -------------------------------------------------------
// C (RB x CB*W) (+)= A (RB x K, element (r,k) at A[r*ars + k*aks]) · X (K x CB*W, row stride ldx).
// Broadcasting A's elements makes one kernel serve S = Q K^T (X = K transposed), O += P V,
// and the transposed products dk += dS^T q, dv += z^T dout (ars = 1, aks = kBc).
template <class Isa, int RB, int CB>
void tile(std::int64_t K, const float* A, std::int64_t ars, std::int64_t aks, const float* X, std::int64_t ldx,
          float* C, std::int64_t ldc, bool accumulate) {
  using V = simd::Vec<Isa>;
  using T = typename V::type;
  constexpr int W = V::width;
  T c[RB][CB];
  for (int r = 0; r < RB; ++r)
    for (int cb = 0; cb < CB; ++cb) c[r][cb] = accumulate ? V::load(C + r * ldc + cb * W) : V::zero();
  for (std::int64_t kk = 0; kk < K; ++kk) {
    T x[CB];
    for (int cb = 0; cb < CB; ++cb) x[cb] = V::load(X + kk * ldx + cb * W);
    for (int r = 0; r < RB; ++r) {
      const T a = V::set1(A[r * ars + kk * aks]);
      for (int cb = 0; cb < CB; ++cb) c[r][cb] = V::fma(a, x[cb], c[r][cb]);
    }
  }
  for (int r = 0; r < RB; ++r)
    for (int cb = 0; cb < CB; ++cb) V::store(C + r * ldc + cb * W, c[r][cb]);
}

template <class Isa, int CB>
void tile_rows(std::int64_t R, std::int64_t K, const float* A, std::int64_t ars, std::int64_t aks, const float* X,
               std::int64_t ldx, float* C, std::int64_t ldc, bool accumulate) {
  constexpr int RB = 4;
  std::int64_t r = 0;
  for (; r + RB <= R; r += RB) tile<Isa, RB, CB>(K, A + r * ars, ars, aks, X, ldx, C + r * ldc, ldc, accumulate);
  for (; r < R; ++r) tile<Isa, 1, CB>(K, A + r * ars, ars, aks, X, ldx, C + r * ldc, ldc, accumulate);
}

// C (R x N) (+)= A (R x K) · X (K x N); N a multiple of V::width.
template <class Isa>
void block_gemm(std::int64_t R, std::int64_t N, std::int64_t K, const float* A, std::int64_t ars, std::int64_t aks,
                const float* X, std::int64_t ldx, float* C, std::int64_t ldc, bool accumulate) {
  using V = simd::Vec<Isa>;
  constexpr int W = V::width;
  constexpr int CB = W == 16 ? 4 : 2;  // 16 (AVX-512) or 8 accumulators: fits the register file
  std::int64_t n = 0;
  for (; n + CB * W <= N; n += CB * W) tile_rows<Isa, CB>(R, K, A, ars, aks, X + n, ldx, C + n, ldc, accumulate);
  for (; n < N; n += W) tile_rows<Isa, 1>(R, K, A, ars, aks, X + n, ldx, C + n, ldc, accumulate);
}

// The fp32 products (the policy of attention_flash_products.h).
template <class Isa>
struct Fp32Products {
  explicit Fp32Products(std::int64_t /*max_dim*/) {}
  void gemm(std::int64_t R, std::int64_t N, std::int64_t K, const float* A, std::int64_t ars, std::int64_t aks,
            const float* X, std::int64_t ldx, float* C, std::int64_t ldc, bool accumulate, bool /*same_a*/ = false,
            bool /*same_x*/ = false) {
    block_gemm<Isa>(R, N, K, A, ars, aks, X, ldx, C, ldc, accumulate);
  }
};

// ---- block loads ---------------------------------------------------------------------------
// rows (n x ldd): row r = alpha * row_of(x, b, h, t0 + r)[0, D), columns D..ldd left as they are
// (zero from allocation).
template <class Isa>
void load_rows(HeadsView x, std::int64_t b, std::int64_t h, std::int64_t t0, std::int64_t n, std::int64_t D,
               float alpha, float* rows, std::int64_t ldd) {
  for (std::int64_t r = 0; r < n; ++r) {
    const float* src = row_of(x, b, h, t0 + r);
    for (std::int64_t d = 0; d < D; ++d) rows[r * ldd + d] = alpha * src[d];
  }
}

// cols (D x kBc): cols[d*kBc + c] = row_of(x, b, h, t0 + c)[d]; columns n..kBc zeroed.
template <class Isa>
void load_transposed(HeadsView x, std::int64_t b, std::int64_t h, std::int64_t t0, std::int64_t n, std::int64_t D,
                     float* cols) {
  // Tiles transposed in registers (simd/transpose.h): the k and v blocks are read through the
  // fused qkv projection's strided view, so every key's row is its own cache line.
  using Tile = simd::TileTranspose<Isa>;
  if constexpr (Tile::available) {
    constexpr int S = Tile::size;
    if (n == kBc && D % S == 0) {
      for (std::int64_t c0 = 0; c0 < kBc; c0 += S) {
        const float* rows[S];
        for (int c = 0; c < S; ++c) rows[c] = row_of(x, b, h, t0 + c0 + c);
        for (std::int64_t d0 = 0; d0 < D; d0 += S) Tile::run(rows, d0, cols + d0 * kBc + c0, kBc);
      }
      return;
    }
  }
  for (std::int64_t c = 0; c < n; ++c) {
    const float* src = row_of(x, b, h, t0 + c);
    for (std::int64_t d = 0; d < D; ++d) cols[d * kBc + c] = src[d];
  }
  for (std::int64_t d = 0; d < D; ++d)
    for (std::int64_t c = n; c < kBc; ++c) cols[d * kBc + c] = 0.0f;
}

// xt (B, Hkv, nkb, D, kBc): every key block of x transposed once, zero-padded past Tk, so
// S = q k^T reads blocks in place instead of re-transposing them for every query block.
// Block-major (not one (D, Tk) matrix per head): a row stride of Tk floats would put the D
// rows of a block in the same L1 sets whenever Tk is a power of two.
// Work items per thread of a parallel loop whose items cost about `work` multiply-adds (or
// floats moved) each: at least 2^17, so a second thread is woken only when its share outlasts
// the wake-up (tens of microseconds with passive waiting). A decode step's attention over a
// short cache (one query row, tens of keys) stays on one thread: with a grain of 1 item a
// small model's batched decode ran at half its 1-thread speed on 2 threads (issue 14).
// Results do not depend on it: every item is computed the same way by whichever thread.
inline std::int64_t grain_for(std::int64_t work) {
  return std::max<std::int64_t>(1, (std::int64_t{1} << 17) / std::max<std::int64_t>(work, 1));
}

template <class Isa>
void transpose_blocks(const AttentionParams& p, HeadsView x, float* xt) {
  const std::int64_t nkb = (p.Tk + kBc - 1) / kBc;
  parallel_for(p.B * p.Hkv * nkb, grain_for(p.D * kBc), [&](std::int64_t w0, std::int64_t w1) {
    for (std::int64_t w = w0; w < w1; ++w) {
      const std::int64_t b = w / (p.Hkv * nkb), hk = w / nkb % p.Hkv, j0 = w % nkb * kBc;
      load_transposed<Isa>(x, b, hk, j0, std::min(kBc, p.Tk - j0), p.D, xt + w * p.D * kBc);
    }
  });
}

// Rows t0.. of x as a (n, ld) matrix for the micro-GEMM: read in place when D fills whole
// vectors (ld = the t stride), else copied into buf (ld = Dp, padding zero).
template <class Isa>
const float* rows_for_gemm(HeadsView x, std::int64_t b, std::int64_t h, std::int64_t t0, std::int64_t n,
                           std::int64_t D, std::int64_t Dp, float* buf, std::int64_t* ld) {
  if (D == Dp) {
    *ld = x.st;
    return row_of(x, b, h, t0);
  }
  load_rows<Isa>(x, b, h, t0, n, D, 1.0f, buf, Dp);
  *ld = Dp;
  return buf;
}

// ---- scores ------------------------------------------------------------------------------
// s (kBc): raw scores of row i for keys j0 + c. Adds bias and ALiBi and writes -inf outside
// the row's allowed spans [lo[t], hi[t]) and past the nc keys of the block.
template <class Isa>
void finish_scores(const AttentionParams& p, std::int64_t b, std::int64_t h, std::int64_t i, std::int64_t n_spans,
                   const std::int64_t* lo, const std::int64_t* hi, std::int64_t j0, std::int64_t nc, float* s) {
  using V = simd::Vec<Isa>;
  constexpr int W = V::width;
  if (p.bias != nullptr) {
    const float* bp = p.bias + b * p.bias_sb + h * p.bias_sh + i * p.bias_si + j0 * p.bias_sj;
    if (p.bias_sj == 1) {
      std::int64_t c = 0;
      for (; c + W <= nc; c += W) V::store(s + c, V::add(V::load(s + c), V::load(bp + c)));
      if (c < nc) {
        const int rest = static_cast<int>(nc - c);
        V::store_partial(s + c, V::add(V::load_partial(s + c, rest), V::load_partial(bp + c, rest)), rest);
      }
    } else {
      for (std::int64_t c = 0; c < nc; ++c) s[c] += bp[c * p.bias_sj];
    }
  }
  if (p.alibi_slopes != nullptr) {
    // s -= slope * |j - i'|: integers, exact in float, so the product matches the naive twin's.
    // (Under a causal mask j <= i', so this is Press et al.'s -slope * (i' - j).)
    alignas(64) static const float kIota[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    const auto slope = V::set1(p.alibi_slopes[h]);
    for (std::int64_t c = 0; c < kBc; c += W) {
      const auto dist = V::add(V::set1(static_cast<float>(j0 + c - (i + p.Tk - p.Tq))), V::load(kIota));
      V::store(s + c, V::fma(slope, V::sub(V::zero(), V::abs(dist)), V::load(s + c)));
    }
  }
  // -inf outside the row's spans (sorted, disjoint) and past the block's nc keys.
  std::int64_t c = 0;
  for (std::int64_t t = 0; t < n_spans; ++t) {
    const std::int64_t a = std::clamp<std::int64_t>(lo[t] - j0, 0, nc), e = std::clamp<std::int64_t>(hi[t] - j0, 0, nc);
    if (a >= nc) break;
    for (; c < a; ++c) s[c] = kNegInf;
    c = std::max(c, e);
  }
  for (; c < kBc; ++c) s[c] = kNegInf;
}

template <class Isa>
float row_max(const float* s) {
  using V = simd::Vec<Isa>;
  auto m = V::load(s);
  for (std::int64_t c = V::width; c < kBc; c += V::width) m = V::max(m, V::load(s + c));
  return V::reduce_max(m);
}

// s[c] = exp(s[c] - shift) for the kBc entries; returns their sum.
template <class Isa>
float exp_row(float* s, float shift) {
  using V = simd::Vec<Isa>;
  const auto sh = V::set1(shift);
  auto acc = V::zero();
  for (std::int64_t c = 0; c < kBc; c += V::width) {
    const auto e = simd::exp<Isa>(V::sub(V::load(s + c), sh));
    V::store(s + c, e);
    acc = V::add(acc, e);
  }
  return V::reduce_add(acc);
}

template <class Isa>
void scale_row(float* x, std::int64_t n, float alpha) {  // n a multiple of the width
  using V = simd::Vec<Isa>;
  const auto a = V::set1(alpha);
  for (std::int64_t c = 0; c < n; c += V::width) V::store(x + c, V::mul(V::load(x + c), a));
}


// ---- forward -------------------------------------------------------------------------------
// Products: Fp32Products<Isa> or a bf16 policy (attention_flash_products.h).
template <class Isa, class Products>
void forward(const AttentionParams& p, HeadsView q, HeadsView k, HeadsView v, float* out, float* lse) {
  using V = simd::Vec<Isa>;
  const std::int64_t D = p.D, Dp = round_up(D, V::width), nqb = (p.Tq + kBr - 1) / kBr;
  const std::int64_t nkb = (p.Tk + kBc - 1) / kBc;
  Scratch<Isa> kt_all(p.B * p.Hkv * nkb * D * kBc);  // (B, Hkv, nkb, D, kBc)
  transpose_blocks<Isa>(p, k, kt_all.get());
  // An item: one query block against every key (q k^T and p v).
  const std::int64_t grain = grain_for(2 * std::min(kBr, p.Tq) * p.Tk * D);
  parallel_for(p.B * p.Hq * nqb, grain, [&](std::int64_t w0, std::int64_t w1) {
    Scratch<Isa> qs_buf(kBr * Dp), vb_buf(kBc * Dp), s_buf(kBr * kBc), o_buf(kBr * Dp), keep_buf(kBc);
    float* qs = qs_buf.get();  // (kBr, Dp) scale * q
    float* vb = vb_buf.get();  // (kBc, Dp) v block, when it cannot be read in place
    float* s = s_buf.get();    // (kBr, kBc) scores, then probabilities
    float* o = o_buf.get();    // (kBr, Dp) unnormalised output
    float* keep = keep_buf.get();
    float m[kBr], l[kBr];
    // One products object per role, so the q block of S = q k^T is converted once per query
    // block, not once per key block (same_a below).
    Products mm_s(std::max({kBr, kBc, Dp})), mm_o(std::max({kBr, kBc, Dp}));
    QueryBlockSpans rr(p, kBr, kBc);  // each row's allowed spans and the key blocks to visit
    for (std::int64_t w = w0; w < w1; ++w) {
      const std::int64_t b = w / (p.Hq * nqb), h = w / nqb % p.Hq, i0 = w % nqb * kBr, hk = h / (p.Hq / p.Hkv);
      const std::int64_t nr = std::min(kBr, p.Tq - i0);
      load_rows<Isa>(q, b, h, i0, nr, D, p.scale, qs, Dp);
      set_all(o, kBr * Dp, 0.0f);
      set_all(m, kBr, kNegInf);
      set_all(l, kBr, 0.0f);
      rr.fill(b, h, i0, nr);
      for (std::int64_t t = 0; t < rr.n_blocks(); ++t) {
        const std::int64_t kb = rr.blocks()[t], j0 = kb * kBc, nc = std::min(kBc, p.Tk - j0);
        const float* kt = kt_all.get() + ((b * p.Hkv + hk) * nkb + kb) * D * kBc;  // (D, kBc)
        std::int64_t ldv = 0;
        const float* vr = rows_for_gemm<Isa>(v, b, hk, j0, nc, D, Dp, vb, &ldv);  // (nc, ldv)
        mm_s.gemm(nr, kBc, D, qs, Dp, 1, kt, kBc, s, kBc, false, t > 0);
        for (std::int64_t r = 0; r < nr; ++r) {
          float* sr = s + r * kBc;
          finish_scores<Isa>(p, b, h, i0 + r, rr.count(r), rr.lo(r), rr.hi(r), j0, nc, sr);
          const float m_new = std::max(m[r], row_max<Isa>(sr));
          const float shift = m_new == kNegInf ? 0.0f : m_new;  // all masked so far: keep exp finite
          const float alpha = std::exp(m[r] - shift);
          l[r] = alpha * l[r] + exp_row<Isa>(sr, shift);
          m[r] = m_new;
          if (p.dropout_p > 0.0f) {
            attention_dropout_scales(p.dropout_seed, p.dropout_p, attention_dropout_index(p, b, h, i0 + r) + static_cast<std::uint64_t>(j0), nc, keep);
            for (std::int64_t c = 0; c < nc; ++c) sr[c] *= keep[c];
          }
          scale_row<Isa>(o + r * Dp, Dp, alpha);
        }
        mm_o.gemm(nr, Dp, nc, s, kBc, 1, vr, ldv, o, Dp, true);
      }
      for (std::int64_t r = 0; r < nr; ++r) {
        const std::int64_t row = (b * p.Hq + h) * p.Tq + i0 + r;
        const float inv = l[r] > 0.0f ? 1.0f / l[r] : 0.0f;  // fully masked row: zeros
        for (std::int64_t d = 0; d < D; ++d) out[row * D + d] = o[r * Dp + d] * inv;
        lse[row] = l[r] > 0.0f ? m[r] + std::log(l[r]) : kNegInf;
      }
    }
  });
}

// ---- backward ------------------------------------------------------------------------------
// Turns a block of raw scores S (nr x kBc) and dP = dout v^T into dS (in s) and, when z is
// not null, z = keep * P (into z, may alias dp).
template <class Isa>
void scores_to_grads(const AttentionParams& p, std::int64_t b, std::int64_t h, std::int64_t i0, std::int64_t nr,
                     const QueryBlockSpans& rr, std::int64_t j0, std::int64_t nc, const float* lse, const float* di,
                     float* s, float* dp, float* z, float* keep) {
  using V = simd::Vec<Isa>;
  constexpr int W = V::width;
  for (std::int64_t r = 0; r < nr; ++r) {
    float* sr = s + r * kBc;
    float* dpr = dp + r * kBc;
    float* zr = z == nullptr ? nullptr : z + r * kBc;
    const std::int64_t i = i0 + r;
    finish_scores<Isa>(p, b, h, i, rr.count(r), rr.lo(r), rr.hi(r), j0, nc, sr);
    if (lse[r] == kNegInf) {  // fully masked row: P = 0, no gradient
      set_all(sr, kBc, 0.0f);
      if (zr != nullptr) set_all(zr, kBc, 0.0f);
      continue;
    }
    exp_row<Isa>(sr, lse[r]);  // P
    if (p.dropout_p > 0.0f) {
      attention_dropout_scales(p.dropout_seed, p.dropout_p, attention_dropout_index(p, b, h, i) + static_cast<std::uint64_t>(j0), nc, keep);
      set_all(keep + nc, kBc - nc, 0.0f);
    }
    const auto dvec = V::set1(di[r]);
    for (std::int64_t c = 0; c < kBc; c += W) {
      const auto pv = V::load(sr + c);
      auto g = V::load(dpr + c);
      if (p.dropout_p > 0.0f) {
        const auto kv = V::load(keep + c);
        g = V::mul(g, kv);
        if (zr != nullptr) V::store(zr + c, V::mul(pv, kv));
      } else if (zr != nullptr) {
        V::store(zr + c, pv);
      }
      V::store(sr + c, V::mul(pv, V::sub(g, dvec)));
    }
  }
}

template <class Isa, class Products>
void backward(const AttentionParams& p, HeadsView q, HeadsView k, HeadsView v, const float* out, const float* lse,
              const float* dout, float* dq, float* dk, float* dv, float* dbias) {
  using V = simd::Vec<Isa>;
  const std::int64_t D = p.D, Dp = round_up(D, V::width), G = p.Hq / p.Hkv;
  const std::int64_t nqb = (p.Tq + kBr - 1) / kBr, nkb = (p.Tk + kBc - 1) / kBc;
  // di = dout_i · out_i per row (B, Hq, Tq).
  Scratch<Isa> di_buf(p.B * p.Hq * p.Tq);
  float* di = di_buf.get();
  parallel_for(p.B * p.Hq * p.Tq, 256, [&](std::int64_t r0, std::int64_t r1) {
    for (std::int64_t r = r0; r < r1; ++r) {
      float acc = 0.0f;
      for (std::int64_t d = 0; d < D; ++d) acc += dout[r * D + d] * out[r * D + d];
      di[r] = acc;
    }
  });
  HeadsView dov{dout, p.Hq * p.Tq * D, p.Tq * D, D};  // dout as a view
  Scratch<Isa> kt_all(p.B * p.Hkv * nkb * D * kBc), vt_all(p.B * p.Hkv * nkb * D * kBc);  // (B, Hkv, nkb, D, kBc)
  transpose_blocks<Isa>(p, k, kt_all.get());
  transpose_blocks<Isa>(p, v, vt_all.get());
  // Pass 1: dk, dv — one work item per (b, kv head, key block).
  const KeyBlockVisitors key_visitors(p, kBr, kBc);
  parallel_for(p.B * p.Hkv * nkb, 1, [&](std::int64_t w0, std::int64_t w1) {
    Scratch<Isa> qs_buf(kBr * Dp), do_buf(kBr * Dp), s_buf(kBr * kBc), dp_buf(kBr * kBc), dk_buf(kBc * Dp),
        dv_buf(kBc * Dp), keep_buf(kBc);
    float *qs = qs_buf.get(), *dob = do_buf.get();   // (kBr, Dp) scale*q, dout rows
    float *s = s_buf.get(), *dp = dp_buf.get();      // (kBr, kBc) scores -> dS, dP -> z
    float *dka = dk_buf.get(), *dva = dv_buf.get();  // (kBc, Dp) accumulators
    // Per role (see forward): the k and v blocks of S and dP are converted once per key block.
    Products mm(std::max({kBr, kBc, Dp})), mm_s(std::max({kBr, kBc, Dp})), mm_dp(std::max({kBr, kBc, Dp}));
    QueryBlockSpans rr(p, kBr, kBc);
    for (std::int64_t w = w0; w < w1; ++w) {
      const std::int64_t b = w / (p.Hkv * nkb), hk = w / nkb % p.Hkv, kb = w % nkb, j0 = kb * kBc;
      const std::int64_t nc = std::min(kBc, p.Tk - j0);
      const float* kt = kt_all.get() + w * D * kBc;  // (D, kBc) k block transposed
      const float* vt = vt_all.get() + w * D * kBc;  // (D, kBc) v block transposed
      set_all(dka, kBc * Dp, 0.0f);
      set_all(dva, kBc * Dp, 0.0f);
      // Only the query blocks that see a key of this block (ascending h, then query block).
      const std::int64_t* visitors = key_visitors.items(b, hk, kb);
      for (std::int64_t t = 0, nv = key_visitors.count(b, hk, kb); t < nv; ++t) {
        const std::int64_t h = visitors[t] / nqb, qb = visitors[t] % nqb;
        const std::int64_t i0 = qb * kBr, nr = std::min(kBr, p.Tq - i0);
        rr.fill(b, h, i0, nr);
        const std::int64_t row0 = (b * p.Hq + h) * p.Tq + i0;
        load_rows<Isa>(q, b, h, i0, nr, D, p.scale, qs, Dp);
        load_rows<Isa>(dov, b, h, i0, nr, D, 1.0f, dob, Dp);
        mm_s.gemm(nr, kBc, D, qs, Dp, 1, kt, kBc, s, kBc, false, false, t > 0);
        mm_dp.gemm(nr, kBc, D, dob, Dp, 1, vt, kBc, dp, kBc, false, false, t > 0);
        scores_to_grads<Isa>(p, b, h, i0, nr, rr, j0, nc, lse + row0, di + row0, s, dp, dp, keep_buf.get());
        mm.gemm(nc, Dp, nr, dp, 1, kBc, dob, Dp, dva, Dp, true);  // dv += z^T dout
        mm.gemm(nc, Dp, nr, s, 1, kBc, qs, Dp, dka, Dp, true);    // dk += dS^T (scale q)
      }
      for (std::int64_t c = 0; c < nc; ++c) {
        const std::int64_t row = (b * p.Hkv + hk) * p.Tk + j0 + c;
        for (std::int64_t d = 0; d < D; ++d) {
          dk[row * D + d] = dka[c * Dp + d];
          dv[row * D + d] = dva[c * Dp + d];
        }
      }
    }
  });
  // Pass 2: dq (and dbias) — one work item per (b, query head, query block).
  parallel_for(p.B * p.Hq * nqb, 1, [&](std::int64_t w0, std::int64_t w1) {
    Scratch<Isa> kb_buf(kBc * Dp), qs_buf(kBr * Dp), do_buf(kBr * Dp), s_buf(kBr * kBc), dp_buf(kBr * kBc),
        dq_buf(kBr * Dp), keep_buf(kBc);
    float* kbk = kb_buf.get();
    float *qs = qs_buf.get(), *dob = do_buf.get(), *s = s_buf.get(), *dp = dp_buf.get(), *dqa = dq_buf.get();
    // Per role (see forward): the q and dout blocks of S and dP are converted once per query block.
    Products mm(std::max({kBr, kBc, Dp})), mm_s(std::max({kBr, kBc, Dp})), mm_dp(std::max({kBr, kBc, Dp}));
    QueryBlockSpans rr(p, kBr, kBc);
    for (std::int64_t w = w0; w < w1; ++w) {
      const std::int64_t b = w / (p.Hq * nqb), h = w / nqb % p.Hq, i0 = w % nqb * kBr, hk = h / G;
      const std::int64_t nr = std::min(kBr, p.Tq - i0), row0 = (b * p.Hq + h) * p.Tq + i0;
      load_rows<Isa>(q, b, h, i0, nr, D, p.scale, qs, Dp);
      load_rows<Isa>(dov, b, h, i0, nr, D, 1.0f, dob, Dp);
      set_all(dqa, kBr * Dp, 0.0f);
      rr.fill(b, h, i0, nr);
      for (std::int64_t t = 0; t < rr.n_blocks(); ++t) {
        const std::int64_t kb = rr.blocks()[t], j0 = kb * kBc, nc = std::min(kBc, p.Tk - j0);
        const std::int64_t blk = ((b * p.Hkv + hk) * nkb + kb) * D * kBc;
        const float *kt = kt_all.get() + blk, *vt = vt_all.get() + blk;  // (D, kBc) each
        std::int64_t ldk = 0;
        const float* kr = rows_for_gemm<Isa>(k, b, hk, j0, nc, D, Dp, kbk, &ldk);  // (nc, ldk)
        mm_s.gemm(nr, kBc, D, qs, Dp, 1, kt, kBc, s, kBc, false, t > 0);
        mm_dp.gemm(nr, kBc, D, dob, Dp, 1, vt, kBc, dp, kBc, false, t > 0);
        scores_to_grads<Isa>(p, b, h, i0, nr, rr, j0, nc, lse + row0, di + row0, s, dp, nullptr, keep_buf.get());
        if (dbias != nullptr)
          for (std::int64_t r = 0; r < nr; ++r) copy_n(s + r * kBc, nc, dbias + (row0 + r) * p.Tk + j0);
        mm.gemm(nr, Dp, nc, s, kBc, 1, kr, ldk, dqa, Dp, true);  // dq += dS k
      }
      for (std::int64_t r = 0; r < nr; ++r)
        for (std::int64_t d = 0; d < D; ++d) dq[(row0 + r) * D + d] = p.scale * dqa[r * Dp + d];
    }
  });
}

}  // namespace tfm::kernels::flash
