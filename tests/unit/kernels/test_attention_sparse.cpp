// Sparse attention (global tokens, BigBird random blocks over a window): the fused kernels,
// the packed plain path and the dense naive twin agree (forward and gradients, every ISA);
// the spans equal the element-wise definition; the fused kernels' plan visits only the key
// blocks the pattern needs; the random blocks are seeded and per head; bad patterns are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "support/test_support.h"
#include "tfm/tfm.h"

using namespace tfm;

namespace {

struct IsaGuard {
  Isa saved = active_isa();
  ~IsaGuard() { set_active_isa(saved); }
};

std::vector<Isa> supported_isas() {
  std::vector<Isa> out{Isa::generic};
  if (cpu_best_isa() == Isa::avx2 || cpu_best_isa() == Isa::avx512) out.push_back(Isa::avx2);
  if (cpu_best_isa() == Isa::avx512) out.push_back(Isa::avx512);
  return out;
}

struct Case {
  const char* name;
  std::int64_t B, Hq, Hkv, Tq, Tk, D;
  bool causal;
  std::int64_t window;
  std::vector<std::int64_t> globals;
  std::int64_t random_blocks, block_size;
  bool pad = false, alibi = false, bias = false;
  float dropout = 0.0f;
};

const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {"globals_window", 1, 2, 2, 97, 97, 8, false, 4, {0, 1, 50}, 0, 64},
      {"random_only", 2, 2, 1, 130, 130, 16, false, 3, {}, 2, 13},
      {"bigbird_causal_pad", 2, 4, 2, 129, 129, 8, true, 6, {0}, 1, 32, true},
      {"bigbird_alibi_bias_dropout", 1, 2, 2, 70, 70, 9, false, 5, {3, 69}, 2, 8, true, true, true, 0.2f},
      {"kv_cache", 1, 2, 2, 3, 200, 8, true, 7, {0, 150}, 2, 20},
      {"window_zero_is_dense", 1, 1, 1, 33, 33, 8, false, 0, {5}, 1, 4},
  };
  return c;
}

struct Result {
  Tensor out, dq, dk, dv, dbias;
};

struct Inputs {
  Tensor q, k, v, w;
  AttentionOptions o;
};

Inputs make_inputs(const Case& c, std::uint64_t seed) {
  Inputs in;
  in.q = test::random_tensor({c.B, c.Hq, c.Tq, c.D}, seed, -2, 2);
  in.k = test::random_tensor({c.B, c.Hkv, c.Tk, c.D}, seed + 1, -2, 2);
  in.v = test::random_tensor({c.B, c.Hkv, c.Tk, c.D}, seed + 2);
  in.w = test::random_tensor({c.B, c.Hq, c.Tq, c.D}, seed + 3);
  in.o.causal = c.causal;
  in.o.window = c.window;
  in.o.sparse.global_tokens = c.globals;
  in.o.sparse.random_blocks = c.random_blocks;
  in.o.sparse.block_size = c.block_size;
  in.o.sparse.seed = seed * 7;
  if (c.pad) {
    std::vector<std::int64_t> lens;
    for (std::int64_t b = 0; b < c.B; ++b) lens.push_back(c.Tk - 11 * (b + 1));
    in.o.valid_lens = Tensor::from_ints(lens, {c.B});
  }
  if (c.alibi) in.o.alibi_slopes = alibi_slopes(c.Hq);
  if (c.bias) in.o.bias = test::random_tensor({c.Hq, 1, c.Tk}, seed + 4);
  in.o.dropout_p = c.dropout;
  in.o.dropout_seed = seed + 5;
  return in;
}

Result run(const Inputs& in, bool flash) {
  Tensor q = in.q.clone().requires_grad_(), k = in.k.clone().requires_grad_(), v = in.v.clone().requires_grad_();
  AttentionOptions o = in.o;
  o.use_flash = flash;
  if (o.bias.defined()) o.bias = o.bias.clone().requires_grad_();
  Result r;
  r.out = scaled_dot_product_attention(q, k, v, o);
  backward(r.out, in.w);
  r.dq = q.grad(), r.dk = k.grad(), r.dv = v.grad();
  if (o.bias.defined()) r.dbias = o.bias.grad();
  return r;
}

// The kernel parameters of a case, for the kernel-level checks.
struct Params {
  kernels::AttentionParams p;
  std::vector<std::int64_t> globals, lens;
};

Params params_of(const Case& c, std::uint64_t seed) {
  Params r;
  kernels::AttentionParams& p = r.p;
  p.B = c.B, p.Hq = c.Hq, p.Hkv = c.Hkv, p.Tq = c.Tq, p.Tk = c.Tk, p.D = c.D;
  p.causal = c.causal;
  p.window = c.window;
  r.globals = c.globals;
  std::sort(r.globals.begin(), r.globals.end());
  p.global_pos = r.globals.data();
  p.n_global = static_cast<std::int64_t>(r.globals.size());
  p.random_blocks = c.random_blocks;
  p.block_size = c.block_size;
  p.random_seed = seed;
  if (c.pad) {
    for (std::int64_t b = 0; b < c.B; ++b) r.lens.push_back(c.Tk - 11 * (b + 1));
    p.valid_lens = r.lens.data();
    p.vl_sb = 1;
  }
  return r;
}

// The pattern written out once more from its definition (docs/sparse_attention.md).
bool allowed_by_definition(const kernels::AttentionParams& p, std::int64_t b, std::int64_t h, std::int64_t i,
                           std::int64_t j) {
  const std::int64_t ip = i + p.shift();
  if (p.causal && j > ip) return false;
  if (p.valid_lens != nullptr && j >= p.valid_lens[b]) return false;
  if (p.window == 0 || (j > ip - p.window && j < ip + p.window)) return true;
  const auto global = [&](std::int64_t x) { return std::find(p.global_pos, p.global_pos + p.n_global, x) != p.global_pos + p.n_global; };
  if (global(ip) || global(j)) return true;
  std::vector<std::int64_t> blocks(static_cast<std::size_t>(std::max<std::int64_t>(p.random_blocks, 1)));
  const std::int64_t key_end = p.valid_lens != nullptr ? p.valid_lens[b] : p.Tk;  // padding never changes the draw
  const std::int64_t n = kernels::attention_random_key_blocks(p, h, ip / p.block_size, key_end, blocks.data());
  return std::find(blocks.begin(), blocks.begin() + n, j / p.block_size) != blocks.begin() + n;
}

}  // namespace

TEST(AttentionSparse, FusedPlainAndDenseTwinAgreeOnEveryIsa) {
  IsaGuard guard;
  std::uint64_t seed = 500;
  for (const Case& c : cases()) {
    const Inputs in = make_inputs(c, seed += 10);
    const Result plain = run(in, /*flash=*/false);
    // The dense naive twin tests every element against the definition: the packed plain
    // path (spans) must give the same forward.
    {
      const Params pr = params_of(c, in.o.sparse.seed);
      kernels::AttentionParams p = pr.p;
      p.scale = 1.0f / std::sqrt(static_cast<float>(c.D));
      Tensor slopes = c.alibi ? alibi_slopes(c.Hq) : Tensor();
      if (c.alibi) p.alibi_slopes = slopes.data<float>();
      Tensor bias = c.bias ? in.o.bias : Tensor();
      if (c.bias) p.bias = bias.data<float>(), p.bias_sh = c.Tk, p.bias_sj = 1;
      p.dropout_p = c.dropout, p.dropout_seed = in.o.dropout_seed;
      const auto hv = [](const Tensor& x) { return kernels::HeadsView{x.data<float>(), x.strides()[0], x.strides()[1], x.strides()[2]}; };
      Tensor out = Tensor::empty({c.B, c.Hq, c.Tq, c.D}), probs = Tensor::empty({c.B, c.Hq, c.Tq, c.Tk});
      kernels::attention_naive_forward(p, hv(in.q), hv(in.k), hv(in.v), out.data<float>(), probs.data<float>());
      test::expect_close(plain.out, out, 1e-5, 1e-6, std::string(c.name) + " packed vs dense twin");
    }
    for (Isa isa : supported_isas()) {
      set_active_isa(isa);
      const Result fused = run(in, /*flash=*/true);
      const std::string what = std::string(c.name) + " " + isa_name(isa);
      test::expect_close(fused.out, plain.out, 1e-4, 2e-5, what + " out");
      test::expect_close(fused.dq, plain.dq, 1e-3, 1e-4, what + " dq");
      test::expect_close(fused.dk, plain.dk, 1e-3, 1e-4, what + " dk");
      test::expect_close(fused.dv, plain.dv, 1e-3, 1e-4, what + " dv");
      if (plain.dbias.defined()) test::expect_close(fused.dbias, plain.dbias, 1e-3, 1e-4, what + " dbias");
    }
  }
}

TEST(AttentionSparse, SpansAndPackedSizeFollowTheDefinition) {
  for (const Case& c : cases()) {
    const Params pr = params_of(c, 99);
    const kernels::AttentionParams& p = pr.p;
    std::vector<std::int64_t> lo(static_cast<std::size_t>(kernels::attention_max_spans(p))), hi(lo.size());
    std::int64_t total = 0;
    for (std::int64_t b = 0; b < p.B; ++b)
      for (std::int64_t h = 0; h < p.Hq; ++h)
        for (std::int64_t i = 0; i < p.Tq; ++i) {
          const std::int64_t n = kernels::attention_key_spans(p, b, h, i, lo.data(), hi.data());
          std::vector<bool> in_span(static_cast<std::size_t>(p.Tk), false);
          for (std::int64_t s = 0; s < n; ++s) {
            ASSERT_LT(lo[s], hi[s]) << c.name;
            if (s > 0) {
              ASSERT_GT(lo[s], hi[s - 1]) << c.name << ": spans must be sorted, disjoint, not touching";
            }
            for (std::int64_t j = lo[s]; j < hi[s]; ++j) in_span[static_cast<std::size_t>(j)] = true;
          }
          for (std::int64_t j = 0; j < p.Tk; ++j) {
            const bool want = allowed_by_definition(p, b, h, i, j);
            ASSERT_EQ(in_span[static_cast<std::size_t>(j)], want) << c.name << " b" << b << " h" << h << " i" << i << " j" << j;
            total += want;
          }
        }
    std::vector<std::int64_t> row_ptr(static_cast<std::size_t>(p.B * p.Hq * p.Tq + 1));
    EXPECT_EQ(kernels::attention_sparse_row_ptr(p, row_ptr.data()), total) << c.name;
  }
}

TEST(AttentionSparse, RandomBlocksAreSeededPerHeadDistinctAndCausal) {
  kernels::AttentionParams p;
  p.Tq = p.Tk = 1000;
  p.random_blocks = 3;
  p.block_size = 10;  // 100 blocks
  p.random_seed = 42;
  std::vector<std::int64_t> a(3), b(3);
  int differ_by_head = 0, differ_by_seed = 0;
  for (std::int64_t qb = 0; qb < 100; ++qb) {
    ASSERT_EQ(kernels::attention_random_key_blocks(p, 0, qb, 1000, a.data()), 3);
    ASSERT_TRUE(a[0] < a[1] && a[1] < a[2] && a[2] < 100) << "sorted, distinct, in range";
    kernels::attention_random_key_blocks(p, 0, qb, 1000, b.data());
    ASSERT_EQ(a, b) << "a pure function of (seed, head, query block)";
    kernels::attention_random_key_blocks(p, 1, qb, 1000, b.data());
    differ_by_head += a != b;
    kernels::AttentionParams p2 = p;
    p2.random_seed = 43;
    kernels::attention_random_key_blocks(p2, 0, qb, 1000, b.data());
    differ_by_seed += a != b;
  }
  EXPECT_GT(differ_by_head, 90);
  EXPECT_GT(differ_by_seed, 90);
  p.causal = true;
  for (std::int64_t qb = 0; qb < 100; ++qb) {
    const std::int64_t n = kernels::attention_random_key_blocks(p, 2, qb, 1000, a.data());
    EXPECT_EQ(n, std::min<std::int64_t>(3, qb + 1));
    for (std::int64_t t = 0; t < n; ++t) EXPECT_LE(a[t], qb) << "causal: no key block after the query's";
  }
}

// The fused kernels' plan: a query block away from the globals visits only its window's
// blocks, the global keys' block and its random blocks — not all T / 64 blocks — and the
// backward's key-major lists hold exactly the same (query block, key block) pairs.
TEST(AttentionSparse, FusedPlanVisitsOnlyNeededKeyBlocks) {
  kernels::AttentionParams p;
  p.B = 1, p.Hq = 2, p.Hkv = 1, p.Tq = p.Tk = 4096, p.D = 8;
  p.window = 32;
  const std::int64_t globals[] = {0, 1};
  p.global_pos = globals, p.n_global = 2;
  p.random_blocks = 2, p.block_size = 64, p.random_seed = 7;
  const std::int64_t kB = 64, nb = p.Tk / kB;
  kernels::QueryBlockSpans spans(p, kB, kB);
  std::int64_t pairs = 0;
  for (std::int64_t h = 0; h < p.Hq; ++h)
    for (std::int64_t qb = 0; qb < nb; ++qb) {
      spans.fill(0, h, qb * kB, kB);
      pairs += spans.n_blocks();
      if (qb == 0) {
        EXPECT_EQ(spans.n_blocks(), nb) << "the block holding the global queries sees every key block";
      } else {
        EXPECT_LE(spans.n_blocks(), 3 + 1 + 2) << "window (<= 3 blocks) + globals' block + 2 random, qb " << qb;
      }
    }
  EXPECT_LT(pairs, 2 * (nb + 6 * (nb - 1)) + 1);
  const kernels::KeyBlockVisitors visitors(p, kB, kB);
  std::int64_t key_pairs = 0;
  for (std::int64_t kb = 0; kb < nb; ++kb) {
    key_pairs += visitors.count(0, 0, kb);
    const std::int64_t* it = visitors.items(0, 0, kb);
    for (std::int64_t t = 1; t < visitors.count(0, 0, kb); ++t) EXPECT_LT(it[t - 1], it[t]);
  }
  EXPECT_EQ(key_pairs, pairs);
  EXPECT_EQ(visitors.count(0, 0, 0), 2 * nb) << "every query block of both heads sees the global keys";
}

TEST(AttentionSparse, BadPatternsAreRefused) {
  const Tensor q = Tensor::zeros({1, 1, 8, 4}), k = Tensor::zeros({1, 1, 8, 4});
  AttentionOptions o;
  o.window = 2;
  o.sparse.global_tokens = {8};
  EXPECT_THROW((void)scaled_dot_product_attention(q, k, k, o), Error);
  o.sparse.global_tokens = {};
  o.sparse.random_blocks = 1;
  o.sparse.block_size = 0;
  EXPECT_THROW((void)scaled_dot_product_attention(q, k, k, o), Error);
  o.sparse.block_size = 4;
  const Tensor q_long = Tensor::zeros({1, 1, 9, 4});
  EXPECT_THROW((void)scaled_dot_product_attention(q_long, k, k, o), Error);
}

// Padding never changes the pattern: a sequence padded to a longer length gives, on its real
// rows, what it gives alone (random blocks are drawn among the blocks holding real keys).
TEST(AttentionSparse, PaddedSequenceMatchesUnpadded) {
  const std::int64_t T = 90, L = 61, D = 8;
  const Tensor q = test::random_tensor({1, 2, T, D}, 1, -2, 2), k = test::random_tensor({1, 2, T, D}, 2, -2, 2),
               v = test::random_tensor({1, 2, T, D}, 3);
  for (bool flash : {true, false}) {
    AttentionOptions o;
    o.use_flash = flash;
    o.window = 3;
    o.sparse.global_tokens = {0};
    o.sparse.random_blocks = 2;
    o.sparse.block_size = 8;
    o.sparse.seed = 77;
    const auto first = [&](const Tensor& x, std::int64_t n) { return contiguous(slice(x, 2, 0, n)); };
    const Tensor alone = scaled_dot_product_attention(first(q, L), first(k, L), first(v, L), o);
    o.valid_lens = Tensor::from_ints({L}, {1});
    const Tensor padded = scaled_dot_product_attention(q, k, v, o);
    test::expect_close(first(padded, L), alone, 1e-5, 1e-6, flash ? "fused" : "plain");
  }
}
