// bf16 mixed-precision training ("precision": "bf16"):
//   - the ops: linear/matmul (forward and both gradients) take the bf16 GEMM, the fused
//     attention takes bf16 products on every path (native and emulated, bit-identical), and
//     fp32 mode is untouched by a bf16 scope;
//   - 200 steps of a tiny model of each family (decoder, encoder, encoder-decoder) in bf16
//     follow the fp32 loss curve: every 20-step window mean within max(3%, 0.02 nats), the
//     last window within max(2%, 0.01 nats) (the absolute floor for the classifier, whose
//     loss falls to ~0.05 where a relative figure means little) — bf16's relative rounding per operand is 2^-9, and the two runs see
//     the same data, dropout masks and initial weights, so only the product rounding differs;
//   - checkpoint/resume in bf16 is bit-exact (N straight == N/2, stop, resume N/2).
// These run under whatever TFM_ISA the suite forces (native or emulated path).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <numeric>

#include "kernels/gemm_bf16.h"
#include "support/test_support.h"
#include "tfm/tfm.h"
#include "tfm/train.h"
#include "support/train_helpers.h"

using namespace tfm;
namespace fs = std::filesystem;
using namespace tfm::train_test;

namespace {

std::string root() {
  const char* src = std::getenv("TFM_SOURCE_DIR");
  return src ? src : ".";
}

// The first n lines of a data file, written into dir.
std::string head_lines(const std::string& file, int n, const std::string& dir) {
  const std::string text = read_file(root() + "/" + file);
  std::size_t cut = 0;
  for (int i = 0; i < n; ++i) cut = text.find('\n', cut) + 1;
  const std::string out = dir + "/" + fs::path(file).filename().string();
  write_file_atomic(out, text.substr(0, cut));
  return out;
}

TrainConfig tiny(const std::string& family, const std::string& dir) {
  const std::string common = R"("optimizer": {"lr": 0.003, "weight_decay": 0.01},
    "schedule": {"name": "cosine", "warmup_steps": 10},
    "training": {"batch_size": 8, "max_steps": 200, "clip_grad_norm": 1.0},
    "eval": {"every": 1000, "batches": 1, "log_every": 50, "bleu_examples": 0},
    "sample": {"tokens": 0})";
  const std::string small = R"("d_model": 32, "n_heads": 2, "d_ff": 64, "dropout": 0.1, "attention_dropout": 0.1)";
  if (family == "decoder") {
    TrainConfig c = tiny_lm(dir);
    c.max_steps = 200;
    c.grad_accum = 1;
    c.eval_every = 1000;
    c.eval_batches = 1;
    c.sample_tokens = 0;
    return c;
  }
  if (family == "encoder")
    return parse_train_config(R"({"task": "classifier", "seed": 3,
      "model": {"architecture": "encoder_only", "head": "classifier", "pooling": "first", "n_layers": 1,
                "max_positions": 48, )" + small + R"(},
      "tokenizer": {"kind": "bpe", "vocab_size": 400},
      "data": {"train": ")" + head_lines("data/sms-spam.tsv", 800, dir) + R"(", "header": true, "test_fraction": 0.1,
               "max_length": 48, "positive_label": "spam"},)" + common + "}", "tiny_encoder.json");
  return parse_train_config(R"({"task": "seq2seq", "seed": 5,
    "model": {"architecture": "encoder_decoder", "n_layers": 1, "n_decoder_layers": 1, "max_positions": 32,
              "norm_placement": "pre", "tie_embeddings": true, )" + small + R"(},
    "tokenizer": {"kind": "bpe", "vocab_size": 400, "isolate_cjk": true},
    "data": {"train": ")" + head_lines("data/cmn-eng.tsv", 800, dir) + R"(", "test_size": 20, "max_length": 32},)" +
                            common + "}", "tiny_s2s.json");
}

// Measured max |bf16 - fp32| / max |fp32| of the attention test below: 0.0026 (dv) to 0.0052
// (dq) on AVX-512; the bound is 4x the largest.
constexpr double kBf16AttentionTolerance = 0.02;

double window_mean(const std::vector<double>& v, std::size_t first, std::size_t n) {
  return std::accumulate(v.begin() + static_cast<std::ptrdiff_t>(first), v.begin() + static_cast<std::ptrdiff_t>(first + n), 0.0) /
         static_cast<double>(n);
}

}  // namespace

TEST(Bf16Ops, LinearAndItsGradientsUseTheBf16Gemm) {
  const Tensor x0 = test::random_tensor({5, 7, 33}, 1), w0 = test::random_tensor({19, 33}, 2);
  const Tensor g = test::random_tensor({5, 7, 19}, 3);
  Tensor x = x0.clone().requires_grad_(), w = w0.clone().requires_grad_();
  Tensor y;
  {
    const PrecisionScope bf16(Precision::bf16);
    y = linear(x, w, Tensor());
    backward(y, g);
  }
  EXPECT_EQ(matmul_precision(), Precision::fp32) << "scope must restore fp32";
  // The same three products with the bf16 naive twin (bf16 operands, double sums).
  const std::int64_t rows = 35, in = 33, out = 19;
  std::vector<float> want_y(static_cast<std::size_t>(rows * out)), want_gx(static_cast<std::size_t>(rows * in)),
      want_gw(static_cast<std::size_t>(out * in));
  const auto xv = x0.to_floats(), wv = w0.to_floats(), gv = g.to_floats();
  kernels::gemm_bf16_naive(false, true, rows, out, in, 1.0f, xv.data(), in, wv.data(), in, 0.0f, want_y.data(), out);
  kernels::gemm_bf16_naive(false, false, rows, in, out, 1.0f, gv.data(), out, wv.data(), in, 0.0f, want_gx.data(), in);
  kernels::gemm_bf16_naive(true, false, out, in, rows, 1.0f, gv.data(), out, xv.data(), in, 0.0f, want_gw.data(), in);
  test::expect_close(y, Tensor::from_floats(want_y, {5, 7, 19}), 1e-5, 1e-5, "y");
  test::expect_close(x.grad(), Tensor::from_floats(want_gx, {5, 7, 33}), 1e-5, 1e-5, "grad x");
  test::expect_close(w.grad(), Tensor::from_floats(want_gw, {19, 33}), 1e-5, 1e-5, "grad w");
  // And they differ from fp32 (the switch really switched).
  const std::vector<float> y32 = linear(x0, w0, Tensor()).to_floats(), y16 = y.to_floats();
  double diff = 0;
  for (std::size_t i = 0; i < y32.size(); ++i) diff = std::max(diff, static_cast<double>(std::fabs(y32[i] - y16[i])));
  EXPECT_GT(diff, 1e-4);
}

// With a bias, the bf16 Linear adds it inside the GEMM (kernels::gemm_bf16_bias): y must be
// the product and then the add, bit for bit, for x with uniform rows (the fused path) and for
// a strided x (the separate add), and the bias gradient is g's column sum either way.
TEST(Bf16Ops, LinearBiasIsFusedWithoutChangingABit) {
  const Tensor w = test::random_tensor({19, 33}, 2), b = test::random_tensor({19}, 4);
  // x: (5, 7, 33) contiguous, then a (5, 7, 33) view of a (7, 5, 33) leaf whose rows are not
  // uniformly spaced (the view itself goes in, so that case takes the separate add).
  for (const bool permuted : {false, true}) {
    const PrecisionScope bf16(Precision::bf16);
    Tensor leaf = test::random_tensor(permuted ? Shape{7, 5, 33} : Shape{5, 7, 33}, 1).requires_grad_();
    const Tensor x = permuted ? transpose(leaf, 0, 1) : leaf;
    ASSERT_EQ(x.is_contiguous(), !permuted);
    Tensor bb = b.clone().requires_grad_();
    const Tensor y = linear(x, w, bb);
    const std::vector<float> got = y.to_floats(), plain = linear(x, w, Tensor()).to_floats(), bv = b.to_floats();
    for (std::size_t i = 0; i < got.size(); ++i) {
      const float want = plain[i] + bv[i % bv.size()];
      ASSERT_EQ(std::memcmp(&got[i], &want, sizeof(float)), 0) << "element " << i << (permuted ? " (permuted x)" : "");
    }
    const Tensor g = test::random_tensor({5, 7, 19}, 3);
    backward(y, g);
    const std::vector<float> gv = g.to_floats(), gb = bb.grad().to_floats();
    for (std::size_t j = 0; j < gb.size(); ++j) {
      double sum = 0;
      for (std::size_t r = 0; r < 35; ++r) sum += gv[r * 19 + j];
      EXPECT_NEAR(gb[j], sum, 1e-4) << "bias gradient " << j;
    }
  }
}

namespace {

struct AttentionGrads {
  Tensor out, dq, dk, dv, dbias;
};

// Causal attention with GQA, per-batch padding, ALiBi, a bias that takes a gradient and
// dropout, at odd sizes (Tk = 77: partial and odd-length key blocks; D = 24: padded head dim).
AttentionGrads run_attention(bool flash, Precision precision) {
  Tensor q = test::random_tensor({2, 4, 77, 24}, 4, -2, 2).requires_grad_();
  Tensor k = test::random_tensor({2, 2, 77, 24}, 5, -2, 2).requires_grad_();
  Tensor v = test::random_tensor({2, 2, 77, 24}, 6).requires_grad_();
  AttentionOptions o;
  o.causal = true;
  o.use_flash = flash;
  o.valid_lens = Tensor::from_ints({77, 61}, {2});
  o.alibi_slopes = alibi_slopes(4);
  o.bias = test::random_tensor({4, 1, 77}, 7).requires_grad_();
  o.dropout_p = 0.1f;
  o.dropout_seed = 9;
  const PrecisionScope scope(precision);
  AttentionGrads r;
  r.out = scaled_dot_product_attention(q, k, v, o);
  backward(r.out, test::random_tensor({2, 4, 77, 24}, 8));
  r.dq = q.grad(), r.dk = k.grad(), r.dv = v.grad(), r.dbias = o.bias.grad();
  return r;
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (const float x : t.to_floats()) m = std::max(m, static_cast<double>(std::fabs(x)));
  return m;
}
double max_diff(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.to_floats(), y = b.to_floats();
  double m = 0;
  for (std::size_t i = 0; i < x.size(); ++i) m = std::max(m, static_cast<double>(std::fabs(x[i] - y[i])));
  return m;
}

}  // namespace

// The fused kernel in bf16 (AttentionParams::bf16): on every ISA the emulated products sit
// within bf16 rounding of the fp32 naive twin — every product operand (q·scale, k, v, P,
// dout, dS) rounded to bf16 (relative 2^-9 each) moves a result by about 2^-8 of the largest
// magnitude, not more — and the VDPBF16PS products equal the emulated ones of the same ISA bit
// for bit (one summation order; the fp32 softmax parts differ between ISAs by their vector
// width, so the equality is per ISA).
TEST(Bf16Ops, FusedAttentionProductsAreBf16OnEveryPath) {
  struct Restore {
    Isa isa = active_isa();
    kernels::Bf16Path path = kernels::bf16_path();
    ~Restore() {
      set_active_isa(isa);
      kernels::set_bf16_path(path);
    }
  } restore;
  const AttentionGrads fp32 = run_attention(false, Precision::fp32);  // the naive twin
  for (const Isa isa : {Isa::generic, Isa::avx2, Isa::avx512}) {
    if (cpu_best_isa() < isa) continue;
    set_active_isa(isa);
    kernels::set_bf16_path(kernels::Bf16Path::emulated);
    const AttentionGrads emulated = run_attention(true, Precision::bf16);
    const std::pair<const char*, std::pair<Tensor, Tensor>> pairs[] = {
        {"out", {emulated.out, fp32.out}}, {"dq", {emulated.dq, fp32.dq}}, {"dk", {emulated.dk, fp32.dk}},
        {"dv", {emulated.dv, fp32.dv}},    {"dbias", {emulated.dbias, fp32.dbias}}};
    for (const auto& [name, t] : pairs) {
      const double scale = max_abs(t.second), diff = max_diff(t.first, t.second);
      EXPECT_LE(diff, kBf16AttentionTolerance * scale) << isa_name(isa) << " " << name;
      EXPECT_GT(diff, 1e-4 * scale) << isa_name(isa) << " " << name << ": no bf16 rounding seen";
    }
    if (isa != Isa::avx512 || !cpu_info().avx512_bf16) continue;
    kernels::set_bf16_path(kernels::Bf16Path::native);
    const AttentionGrads native = run_attention(true, Precision::bf16);
    test::expect_bitwise_equal(native.out, emulated.out, "native vs emulated out");
    test::expect_bitwise_equal(native.dq, emulated.dq, "native vs emulated dq");
    test::expect_bitwise_equal(native.dk, emulated.dk, "native vs emulated dk");
    test::expect_bitwise_equal(native.dv, emulated.dv, "native vs emulated dv");
    test::expect_bitwise_equal(native.dbias, emulated.dbias, "native vs emulated dbias");
  }
}

class Bf16Training : public ::testing::TestWithParam<std::string> {};

TEST_P(Bf16Training, LossCurveFollowsFp32Over200Steps) {
  const std::string dir = tmp_dir("bf16_" + GetParam());
  TrainConfig cfg = tiny(GetParam(), dir);
  TrainOptions o;
  o.quiet = true;
  o.out_dir = dir + "/fp32";
  const TrainResult fp32 = run_training(cfg, o);
  cfg.precision = Precision::bf16;
  o.out_dir = dir + "/bf16";
  const TrainResult bf16 = run_training(cfg, o);
  ASSERT_EQ(fp32.losses.size(), 200u);
  ASSERT_EQ(bf16.losses.size(), 200u);
  EXPECT_NE(fp32.losses, bf16.losses) << "bf16 run identical to fp32: precision not applied";
  for (std::size_t w = 0; w < 200; w += 20) {
    const double a = window_mean(fp32.losses, w, 20), b = window_mean(bf16.losses, w, 20);
    EXPECT_LT(std::fabs(a - b), std::max(0.03 * a, 0.02)) << GetParam() << " steps " << w + 1 << "-" << w + 20 << ": fp32 " << a
                                           << " bf16 " << b;
  }
  const double a = window_mean(fp32.losses, 180, 20), b = window_mean(bf16.losses, 180, 20);
  EXPECT_LT(std::fabs(a - b), std::max(0.02 * a, 0.01)) << GetParam() << " last 20 steps: fp32 " << a << " bf16 " << b;
  EXPECT_LT(b, window_mean(bf16.losses, 0, 20) - 0.3) << "bf16 loss did not fall";
  EXPECT_NE(read_file(o.out_dir + "/train_config.json").find(R"("precision": "bf16")"), std::string::npos);
  fs::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(Families, Bf16Training, ::testing::Values("decoder", "encoder", "encoder_decoder"));

TEST(Bf16Training, ResumeIsBitExact) {
  const std::string dir = tmp_dir("bf16_resume");
  TrainConfig cfg = tiny_lm(dir);
  cfg.precision = Precision::bf16;
  cfg.max_steps = 8;
  cfg.sample_tokens = 0;
  TrainOptions o;
  o.quiet = true;
  o.out_dir = dir + "/full";
  const TrainResult full = run_training(cfg, o);
  const InterruptedRun part = train_interrupted(cfg, o, dir + "/part", 4);
  EXPECT_EQ(part.losses, full.losses);
  EXPECT_EQ(part.rest.val_loss, full.val_loss);
  const LoadedModel x = load_model_dir(o.out_dir), y = load_model_dir(dir + "/part");
  for (const auto& [k, p] : x.model.parameters()) test::expect_bitwise_equal(y.model.parameters().at(k), p, k);
  fs::remove_all(dir);
}

// "auto" is bf16 where bf16 products run in hardware and fp32 where they would be emulated
// (slower than fp32); the named precisions are what they say, and others are refused.
TEST(Bf16Train, AutoPrecisionIsBf16OnlyWhereTheCpuMultipliesBf16) {
  struct Restore {
    kernels::Bf16Path path = kernels::bf16_path();
    ~Restore() { kernels::set_bf16_path(path); }
  } restore;
  EXPECT_EQ(training_precision("fp32"), Precision::fp32);
  EXPECT_EQ(training_precision("bf16"), Precision::bf16);
  EXPECT_THROW(training_precision("fp16"), Error);
  kernels::set_bf16_path(kernels::Bf16Path::emulated);
  EXPECT_EQ(training_precision("auto"), Precision::fp32);
  const TrainConfig c = parse_train_config(R"({"model": {"d_model": 32}, "data": {"train": "t.txt"},
      "training": {"precision": "auto"}})", "auto.json");
  EXPECT_EQ(c.precision, Precision::fp32);
  if (kernels::bf16_path_available(kernels::Bf16Path::native)) {
    kernels::set_bf16_path(kernels::Bf16Path::native);
    EXPECT_EQ(training_precision("auto"), Precision::bf16);
  }
}
