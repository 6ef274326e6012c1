// Attention: the fused (FlashAttention-2) kernels against the naive twin, forward and
// backward, for every mask type and their combinations, odd lengths, GQA/MQA and every ISA;
// plus the helpers (ALiBi slopes, counter-based dropout).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "kernels/random.h"
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

struct MaskSpec {
  const char* name;
  bool causal = false;
  int pad = 0;  // 0 none, 1 per batch (B), 2 per query (B, Tq)
  std::int64_t window = 0;
  int bias = 0;  // 0 none, 1 full (B, Hq, Tq, Tk), 2 broadcast (Hq, 1, Tk)
  bool alibi = false;
  float dropout = 0.0f;
};

struct Shape6 {
  std::int64_t B, Hq, Hkv, Tq, Tk, D;
};

std::string describe(const MaskSpec& m, const Shape6& s) {
  return std::string(m.name) + " B" + std::to_string(s.B) + " Hq" + std::to_string(s.Hq) + " Hkv" +
         std::to_string(s.Hkv) + " Tq" + std::to_string(s.Tq) + " Tk" + std::to_string(s.Tk) + " D" +
         std::to_string(s.D);
}

// Deterministic lengths in [0, Tk] (0 included, to exercise fully masked rows).
std::vector<std::int64_t> lengths(std::int64_t n, std::int64_t Tk, std::uint64_t seed) {
  std::vector<std::int64_t> out;
  for (std::int64_t i = 0; i < n; ++i)
    out.push_back(static_cast<std::int64_t>((seed * 2654435761u + static_cast<std::uint64_t>(i) * 40503u) % 977u) %
                  (Tk + 1));
  return out;
}

struct Inputs {
  Tensor q, k, v, w;
  AttentionOptions o;
};

Inputs make_inputs(const MaskSpec& m, const Shape6& s, std::uint64_t seed) {
  Inputs in;
  in.q = test::random_tensor({s.B, s.Hq, s.Tq, s.D}, seed, -2, 2);
  in.k = test::random_tensor({s.B, s.Hkv, s.Tk, s.D}, seed + 1, -2, 2);
  in.v = test::random_tensor({s.B, s.Hkv, s.Tk, s.D}, seed + 2);
  in.w = test::random_tensor({s.B, s.Hq, s.Tq, s.D}, seed + 3);
  in.o.causal = m.causal;
  in.o.window = m.window;
  if (m.pad == 1) in.o.valid_lens = Tensor::from_ints(lengths(s.B, s.Tk, seed), {s.B});
  if (m.pad == 2) in.o.valid_lens = Tensor::from_ints(lengths(s.B * s.Tq, s.Tk, seed), {s.B, s.Tq});
  if (m.bias == 1) in.o.bias = test::random_tensor({s.B, s.Hq, s.Tq, s.Tk}, seed + 4);
  if (m.bias == 2) in.o.bias = test::random_tensor({s.Hq, 1, s.Tk}, seed + 4);
  if (m.alibi) in.o.alibi_slopes = alibi_slopes(s.Hq);
  in.o.dropout_p = m.dropout;
  in.o.dropout_seed = seed + 5;
  return in;
}

struct Result {
  Tensor out, dq, dk, dv, dbias;
};

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

void expect_same(const Result& got, const Result& want, const std::string& what) {
  test::expect_close(got.out, want.out, 1e-4, 2e-5, what + " out");
  test::expect_close(got.dq, want.dq, 1e-3, 1e-4, what + " dq");
  test::expect_close(got.dk, want.dk, 1e-3, 1e-4, what + " dk");
  test::expect_close(got.dv, want.dv, 1e-3, 1e-4, what + " dv");
  if (want.dbias.defined()) test::expect_close(got.dbias, want.dbias, 1e-3, 1e-4, what + " dbias");
}

// Fused vs naive for one mask spec over the shape grid, on every ISA.
void check_against_naive(const MaskSpec& m, const std::vector<Shape6>& shapes) {
  IsaGuard guard;
  std::uint64_t seed = 100;
  for (const Shape6& s : shapes) {
    const Inputs in = make_inputs(m, s, seed += 10);
    const Result want = run(in, /*flash=*/false);
    for (Isa isa : supported_isas()) {
      set_active_isa(isa);
      expect_same(run(in, /*flash=*/true), want, describe(m, s) + " " + isa_name(isa));
    }
  }
}

std::vector<Shape6> grid() {
  // (Tq, Tk): equal odd/block-edge lengths, decode (Tq = 1), KV-cache (Tq < Tk), Tq > Tk.
  const std::vector<std::pair<std::int64_t, std::int64_t>> lens = {{1, 1},   {17, 17}, {63, 63}, {64, 64}, {65, 65},
                                                                    {1, 65},  {17, 64}, {63, 65}, {65, 17}};
  const std::vector<std::pair<std::int64_t, std::int64_t>> heads = {{2, 2}, {4, 2}, {3, 1}};  // MHA, GQA, MQA
  // Every length pair for every D; the head layouts rotate so each (D, layout) pair appears
  // three times (the full product triples the run time for little extra coverage).
  std::vector<Shape6> out;
  std::size_t n = 0;
  for (std::int64_t D : {8, 32, 64})
    for (auto [tq, tk] : lens) {
      const auto [hq, hkv] = heads[n++ % heads.size()];
      out.push_back({2, hq, hkv, tq, tk, D});
    }
  return out;
}

const MaskSpec kMasks[] = {
    {"none"},
    {"causal", true},
    {"pad_batch", false, 1},
    {"pad_query", false, 2},
    {"window", false, 0, 5},
    {"bias_full", false, 0, 0, 1},
    {"bias_broadcast", false, 0, 0, 2},
    {"alibi", false, 0, 0, 0, true},
    {"dropout", false, 0, 0, 0, false, 0.3f},
    {"causal_pad_bias", true, 2, 0, 1},
    {"window_alibi_dropout", false, 0, 7, 0, true, 0.2f},
    {"causal_window_pad", true, 1, 20},
    {"everything", true, 2, 9, 2, true, 0.25f},
};

}  // namespace

class AttentionFlashVsNaive : public ::testing::TestWithParam<MaskSpec> {};

TEST_P(AttentionFlashVsNaive, ForwardAndBackwardOverGrid) { check_against_naive(GetParam(), grid()); }

TEST_P(AttentionFlashVsNaive, StandardSizes) {
  std::vector<Shape6> shapes;
  for (std::int64_t t : {1, 7, 31, 32, 33, 257}) shapes.push_back({1, 2, 1, t, t, 16});
  shapes.push_back({1, 2, 2, 130, 300, 64});  // larger, KV-cache style
  shapes.push_back({1, 2, 1, 33, 33, 17});    // D not a multiple of any vector width
  check_against_naive(GetParam(), shapes);
}

INSTANTIATE_TEST_SUITE_P(Masks, AttentionFlashVsNaive, ::testing::ValuesIn(kMasks),
                         [](const ::testing::TestParamInfo<MaskSpec>& p) { return std::string(p.param.name); });

TEST(AttentionKernels, AlibiSlopesMatchThePaperFormula) {
  // Reference: Press et al.'s get_slopes(n), written as in their repository.
  std::function<std::vector<double>(std::int64_t)> ref = [&](std::int64_t n) {
    auto pow2 = [](std::int64_t m) {
      const double start = std::pow(2.0, -std::pow(2.0, -(std::log2(static_cast<double>(m)) - 3)));
      std::vector<double> s;
      for (std::int64_t i = 0; i < m; ++i) s.push_back(start * std::pow(start, static_cast<double>(i)));
      return s;
    };
    const double l = std::log2(static_cast<double>(n));
    if (l == std::floor(l)) return pow2(n);
    const std::int64_t closest = std::int64_t{1} << static_cast<int>(std::floor(l));
    std::vector<double> s = pow2(closest);
    const std::vector<double> extra = ref(2 * closest);
    for (std::int64_t i = 0; static_cast<std::int64_t>(s.size()) < n; i += 2) s.push_back(extra[static_cast<std::size_t>(i)]);
    return s;
  };
  for (std::int64_t n = 1; n <= 40; ++n) {
    const std::vector<float> got = kernels::alibi_slopes(n);
    const std::vector<double> want = ref(n);
    ASSERT_EQ(got.size(), want.size()) << n;
    for (std::size_t h = 0; h < got.size(); ++h) EXPECT_NEAR(got[h], want[h], 1e-7 * want[h]) << "n " << n << " h " << h;
  }
  // Powers of two: slope_h = 2^(-8h/n), h = 1..n.
  const std::vector<float> s8 = kernels::alibi_slopes(8);
  for (int h = 1; h <= 8; ++h) EXPECT_FLOAT_EQ(s8[static_cast<std::size_t>(h - 1)], std::exp2(-static_cast<float>(h)));
  EXPECT_THROW(alibi_slopes(0), Error);
}

TEST(AttentionKernels, DropoutScalesArePureFunctionsOfTheIndex) {
  const std::int64_t n = 100003;
  const float p = 0.3f;
  std::vector<float> whole(static_cast<std::size_t>(n)), pieces(static_cast<std::size_t>(n));
  kernels::attention_dropout_scales(7, p, 5, n, whole.data());
  // Any split (odd offsets, lengths not multiples of 4) gives the same decisions.
  for (std::int64_t at = 0, len = 1; at < n; at += len, len = len % 13 + 3)
    kernels::attention_dropout_scales(7, p, static_cast<std::uint64_t>(5 + at), std::min(len, n - at), pieces.data() + at);
  EXPECT_EQ(whole, pieces);
  std::int64_t dropped = 0;
  for (float s : whole) {
    EXPECT_TRUE(s == 0.0f || s == 1.0f / (1.0f - p));
    dropped += s == 0.0f;
  }
  EXPECT_NEAR(static_cast<double>(dropped) / n, p, 0.01);
  std::vector<float> other(static_cast<std::size_t>(n));
  kernels::attention_dropout_scales(8, p, 5, n, other.data());
  EXPECT_NE(whole, other);  // the seed matters
  // The definition, one Philox call per element (the batched draw is its fast twin).
  for (std::int64_t t = 0; t < n; t += 97) {
    const std::uint64_t idx = 5 + static_cast<std::uint64_t>(t);
    const float u = kernels::uniform_from_bits(kernels::philox4x32(7, 2, idx / 4)[idx % 4]);
    ASSERT_EQ(whole[static_cast<std::size_t>(t)], u < p ? 0.0f : 1.0f / (1.0f - p)) << "element " << t;
  }
}

TEST(AttentionKernels, AlibiOnTheFlyEqualsExplicitBias) {
  // The fused kernel computes -slope*(i'-j) itself; an explicit bias tensor must agree.
  IsaGuard guard;
  const std::int64_t B = 1, H = 6, Tq = 37, Tk = 70, D = 16;
  const Tensor q = test::random_tensor({B, H, Tq, D}, 1), k = test::random_tensor({B, H, Tk, D}, 2),
               v = test::random_tensor({B, H, Tk, D}, 3);
  const std::vector<float> slopes = kernels::alibi_slopes(H);
  std::vector<float> bias;
  for (std::int64_t h = 0; h < H; ++h)
    for (std::int64_t i = 0; i < Tq; ++i)
      for (std::int64_t j = 0; j < Tk; ++j)
        bias.push_back(-slopes[static_cast<std::size_t>(h)] * static_cast<float>(i + Tk - Tq - j));
  AttentionOptions a, b;
  a.causal = b.causal = true;
  a.alibi_slopes = alibi_slopes(H);
  b.bias = Tensor::from_floats(bias, {H, Tq, Tk});
  for (Isa isa : supported_isas()) {
    set_active_isa(isa);
    test::expect_close(scaled_dot_product_attention(q, k, v, a), scaled_dot_product_attention(q, k, v, b), 1e-5, 1e-6,
                       std::string("alibi ") + isa_name(isa));
  }
}
