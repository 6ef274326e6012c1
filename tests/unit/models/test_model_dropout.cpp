// Model-level dropout (training vs eval, reproducible (seed, step) masks) and the fused vs the
// plain attention path inside whole models.
#include <gtest/gtest.h>

#include <cmath>

#include "support/test_support.h"
#include "tfm/tfm.h"

using namespace tfm;

namespace {

ModelConfig decoder_config(double dropout, double attention_dropout, double embedding_dropout) {
  ModelConfig c;
  c.architecture = Architecture::decoder_only;
  c.vocab_size = 37; c.d_model = 32; c.n_heads = 4; c.n_kv_heads = 2; c.n_layers = 2; c.d_ff = 48;
  c.max_positions = 32;
  c.activation = FfnActivation::swiglu;
  c.position = PositionKind::rope;
  c.dropout = dropout;
  c.attention_dropout = attention_dropout;
  c.embedding_dropout = embedding_dropout;
  return c;
}

ModelInputs decoder_inputs() {
  ModelInputs in;
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 2 * 11; ++i) ids.push_back((i * 7 + 3) % 37);
  in.input_ids = Tensor::from_ints(ids, {2, 11}, DType::i64);
  in.valid_lens = Tensor::from_ints({11, 6}, {2}, DType::i64);
  return in;
}

ModelInputs seq2seq_inputs() {
  ModelInputs in;
  std::vector<std::int64_t> src, tgt;
  for (int i = 0; i < 3 * 13; ++i) src.push_back((i * 5 + 1) % 41);
  for (int i = 0; i < 3 * 9; ++i) tgt.push_back((i * 11 + 2) % 41);
  in.input_ids = Tensor::from_ints(src, {3, 13}, DType::i64);
  in.valid_lens = Tensor::from_ints({13, 7, 1}, {3}, DType::i64);
  in.decoder_input_ids = Tensor::from_ints(tgt, {3, 9}, DType::i64);
  in.decoder_valid_lens = Tensor::from_ints({9, 4, 9}, {3}, DType::i64);
  return in;
}

Tensor logits(Model& m, const ModelInputs& in) {
  NoGradGuard ng;
  return m.forward(in).logits;
}

// Largest |a - b| (both the same shape).
double max_diff(const Tensor& a, const Tensor& b) {
  const auto x = a.to_floats(), y = b.to_floats();
  EXPECT_EQ(x.size(), y.size());
  double d = 0;
  for (std::size_t i = 0; i < x.size(); ++i) d = std::max(d, std::abs(static_cast<double>(x[i]) - y[i]));
  return d;
}

}  // namespace

// ---- dropout ----------------------------------------------------------------------------------

TEST(ModelDropout, TrainingDiffersFromEvalAndEvalIsDeterministic) {
  Model m = Model::create(decoder_config(0.1, 0.1, 0.1), 1);
  const ModelInputs in = decoder_inputs();
  const Tensor e1 = logits(m, in);
  m.set_dropout_seed(99, 3);  // has no effect in eval mode
  const Tensor e2 = logits(m, in);
  test::expect_bitwise_equal(e1, e2, "eval forward twice");
  m.set_training(true);
  EXPECT_TRUE(m.training());
  m.set_dropout_seed(1, 0);
  EXPECT_GT(max_diff(logits(m, in), e1), 1e-2);
  m.set_training(false);
  test::expect_bitwise_equal(logits(m, in), e1, "eval after training");
}

TEST(ModelDropout, SameSeedAndStepReproduceLogitsAndGradients) {
  Model m = Model::create(decoder_config(0.1, 0.1, 0.1), 2);
  m.set_training(true);
  const ModelInputs in = decoder_inputs();
  std::map<std::string, Tensor> first_grads;
  Tensor first;
  for (int run = 0; run < 2; ++run) {
    for (auto& [name, p] : m.parameters()) p.requires_grad_();
    m.set_dropout_seed(7, 42);
    const Tensor y = m.forward(in).logits;
    backward(sum(y));
    if (run == 0) {
      first = y;
      for (auto& [name, p] : m.parameters()) first_grads[name] = p.grad();
    } else {
      test::expect_bitwise_equal(y, first, "logits of the same (seed, step)");
      for (auto& [name, p] : m.parameters()) test::expect_bitwise_equal(p.grad(), first_grads[name], name);
    }
    for (auto& [name, p] : m.parameters()) p.zero_grad();
  }
}

// A micro-batch split across data-parallel ranks: rows [first, first + count) of a batch,
// forwarded alone under set_dropout_rows, draw the masks those rows get in the whole batch
// (hidden, embedding, attention-weight dropout and stochastic depth), on both attention paths.
TEST(ModelDropout, RowsOfABatchDrawTheirMasksInTheWholeBatch) {
  const auto rows_of = [](const ModelInputs& in, std::int64_t a, std::int64_t b) {
    ModelInputs out = in;
    for (Tensor* t : {&out.input_ids, &out.valid_lens, &out.decoder_input_ids, &out.decoder_valid_lens})
      if (t->defined()) *t = contiguous(slice(*t, 0, a, b));
    return out;
  };
  ModelConfig dec = decoder_config(0.2, 0.2, 0.2);
  dec.stochastic_depth = 0.5;
  ModelInputs four;
  std::vector<std::int64_t> ids;
  for (int i = 0; i < 4 * 11; ++i) ids.push_back((i * 13 + 5) % 37);
  four.input_ids = Tensor::from_ints(ids, {4, 11}, DType::i64);
  four.valid_lens = Tensor::from_ints({11, 6, 9, 11}, {4}, DType::i64);
  ModelConfig s2s = decoder_config(0.2, 0.2, 0.2);
  s2s.architecture = Architecture::encoder_decoder;
  s2s.position = PositionKind::sinusoidal;
  s2s.vocab_size = 41;
  s2s.stochastic_depth = 0.5;
  for (const auto& [cfg, in] : {std::pair{dec, four}, std::pair{s2s, seq2seq_inputs()}}) {
    for (bool fused : {true, false}) {
      Model m = Model::create(cfg, 4);
      m.set_fused_attention(fused);
      m.set_training(true);
      const std::int64_t B = in.input_ids.size(0);
      m.set_dropout_seed(5, 9);
      const Tensor whole = logits(m, in);
      for (std::int64_t first = 0; first < B; ++first) {
        for (std::int64_t end = first + 1; end <= B; ++end) {
          m.set_dropout_seed(5, 9);
          m.set_dropout_rows(first, end - first, B);
          const Tensor part = logits(m, rows_of(in, first, end));
          EXPECT_LT(max_diff(part, contiguous(slice(whole, 0, first, end))), 1e-5)
              << (fused ? "fused" : "plain") << " rows [" << first << ", " << end << ") of " << B;
        }
      }
      m.set_dropout_rows(0, 0, 0);
      m.set_dropout_seed(5, 9);
      test::expect_bitwise_equal(logits(m, in), whole, "the whole batch again");
      // Without the window a part draws the first rows' masks: the check above can fail.
      m.set_dropout_seed(5, 9);
      EXPECT_GT(max_diff(logits(m, rows_of(in, 1, 2)), contiguous(slice(whole, 0, 1, 2))), 1e-3);
    }
  }
  Model m = Model::create(dec, 4);
  EXPECT_THROW(m.set_dropout_rows(3, 2, 4), Error);
}

TEST(ModelDropout, MasksChangeWithStepSeedAndCall) {
  Model m = Model::create(decoder_config(0.1, 0.1, 0.1), 3);
  m.set_training(true);
  const ModelInputs in = decoder_inputs();
  m.set_dropout_seed(7, 1);
  const Tensor a = logits(m, in);
  const Tensor a_next = logits(m, in);  // the second forward of the same step draws new masks
  m.set_dropout_seed(7, 2);
  const Tensor b = logits(m, in);
  m.set_dropout_seed(8, 1);
  const Tensor c = logits(m, in);
  EXPECT_GT(max_diff(a, a_next), 1e-2);
  EXPECT_GT(max_diff(a, b), 1e-2);
  EXPECT_GT(max_diff(a, c), 1e-2);
}

TEST(ModelDropout, EachRateIsWired) {
  // Only one of the three rates non-zero at a time: each alone changes the training forward.
  const ModelInputs in = decoder_inputs();
  const double rates[3][3] = {{0.2, 0, 0}, {0, 0.2, 0}, {0, 0, 0.2}};
  for (const auto& r : rates) {
    Model m = Model::create(decoder_config(r[0], r[1], r[2]), 4);
    const Tensor e = logits(m, in);
    m.set_training(true);
    m.set_dropout_seed(5, 0);
    EXPECT_GT(max_diff(logits(m, in), e), 1e-3) << r[0] << " " << r[1] << " " << r[2];
  }
}

TEST(ModelDropout, ZeroRatesInTrainingEqualEval) {
  ModelConfig c = decoder_config(0, 0, 0);
  Model m = Model::create(c, 5);
  const ModelInputs in = decoder_inputs();
  const Tensor e = logits(m, in);
  m.set_training(true);
  m.set_dropout_seed(1, 1);
  test::expect_bitwise_equal(logits(m, in), e, "training with dropout 0");

  c = model_preset("vaswani");  // encoder-decoder with cross-attention
  c.vocab_size = 41; c.d_model = 16; c.n_heads = 2; c.d_ff = 24; c.n_layers = 1; c.max_positions = 32;
  c.dropout = c.attention_dropout = c.embedding_dropout = 0;
  Model s = Model::create(c, 6);
  const Tensor se = logits(s, seq2seq_inputs());
  s.set_training(true);
  test::expect_bitwise_equal(logits(s, seq2seq_inputs()), se, "seq2seq training with dropout 0");
}

TEST(ModelDropout, TrainingForwardIsThreadCountIndependent) {
  Model m = Model::create(decoder_config(0.1, 0.1, 0.1), 6);
  m.set_training(true);
  const ModelInputs in = decoder_inputs();
  const int saved = num_threads();
  set_num_threads(1);
  m.set_dropout_seed(3, 9);
  const Tensor one = logits(m, in);
  set_num_threads(2);
  m.set_dropout_seed(3, 9);
  const Tensor two = logits(m, in);
  set_num_threads(saved);
  test::expect_bitwise_equal(one, two, "1 vs 2 threads");
}

TEST(ModelParameters, MarkingParametersAfterCreateGivesGradients) {
  // The model's modules hold handles to the map's tensors: marking a map entry afterwards must
  // reach them (the handles share one autograd record).
  Model m = Model::create(decoder_config(0, 0, 0), 9);
  for (auto& [name, p] : m.parameters()) p.requires_grad_();
  backward(sum(m.forward(decoder_inputs()).logits));
  for (const auto& [name, p] : m.parameters()) EXPECT_TRUE(p.grad().defined()) << name;
}

// ---- fused vs plain attention -------------------------------------------------------------

namespace {

// Forward + backward of sum(logits * w) with the fused (default) and the plain path.
void compare_paths(const ModelConfig& c, const ModelInputs& in, bool training, const std::string& what) {
  std::map<std::string, Tensor> grads[2];
  Tensor outs[2];
  Model m = Model::create(c, 21);
  for (int path = 0; path < 2; ++path) {
    if (path == 1) m.set_fused_attention(false);
    m.set_training(training);
    m.set_dropout_seed(11, 4);
    for (auto& [name, p] : m.parameters()) {
      p.zero_grad();
      p.requires_grad_();
    }
    const Tensor y = m.forward(in).logits;
    const Tensor w = Tensor::randn(y.shape(), 77);
    backward(y, w);
    outs[path] = y;
    for (auto& [name, p] : m.parameters()) grads[path][name] = p.grad();
  }
  test::expect_close(outs[1], outs[0], 1e-5, 1e-5, what + " logits plain vs fused");
  for (const auto& [name, g] : grads[0]) {
    ASSERT_TRUE(g.defined()) << what << " " << name;
    test::expect_close(grads[1].at(name), g, 1e-4, 1e-5, what + " grad " + name);
  }
}

}  // namespace

TEST(ModelAttentionPath, DefaultIsFused) {
  Model m = Model::create(decoder_config(0, 0, 0), 8);
  const Tensor d = logits(m, decoder_inputs());
  m.set_fused_attention(true);
  test::expect_bitwise_equal(logits(m, decoder_inputs()), d, "default vs fused");
  // The two paths add in different orders (online vs two-pass softmax), so their last bits
  // differ somewhere: equality here would mean the switch never reaches the attention op.
  m.set_fused_attention(false);
  EXPECT_GT(max_diff(logits(m, decoder_inputs()), d), 0.0);
}

TEST(ModelAttentionPath, PlainEqualsFusedDecoderRopeGqa) {
  compare_paths(decoder_config(0, 0, 0), decoder_inputs(), false, "decoder rope gqa");
}

TEST(ModelAttentionPath, PlainEqualsFusedDecoderAlibiWindow) {
  ModelConfig c = decoder_config(0, 0, 0);
  c.position = PositionKind::alibi;
  c.n_heads = 8; c.n_kv_heads = 1;
  c.sliding_window = 4;
  compare_paths(c, decoder_inputs(), false, "decoder alibi window");
}

TEST(ModelAttentionPath, PlainEqualsFusedEncoderDecoderT5Relative) {
  ModelConfig c;
  c.architecture = Architecture::encoder_decoder;
  c.vocab_size = 41; c.d_model = 32; c.n_heads = 4; c.n_kv_heads = 2; c.n_layers = 2; c.d_ff = 40;
  c.norm = NormKind::rms_norm;
  c.position = PositionKind::t5_relative;
  c.relative_buckets = 8; c.relative_max_distance = 16;
  c.scale_attention_scores = false;
  c.dropout = c.attention_dropout = c.embedding_dropout = 0;
  compare_paths(c, seq2seq_inputs(), false, "enc-dec t5 relative");
}

TEST(ModelAttentionPath, PlainEqualsFusedWithAttentionDropout) {
  // Both paths draw the attention-weight mask from the same per-element function of the seed.
  compare_paths(decoder_config(0.1, 0.2, 0.1), decoder_inputs(), true, "training with dropout");
}

// ---- position_offset ------------------------------------------------------------------------

TEST(ModelPositionOffset, RelativePositionsAreTranslationInvariant) {
  // Without a cache the keys are the same T tokens, now at offset .. offset+T-1: positions that
  // only enter through differences (RoPE, ALiBi, T5 buckets) give the offset-0 logits.
  for (const PositionKind pos : {PositionKind::rope, PositionKind::alibi, PositionKind::t5_relative}) {
    ModelConfig c = decoder_config(0, 0, 0);
    c.position = pos;
    c.relative_buckets = 8;
    c.relative_max_distance = 16;
    Model m = Model::create(c, 12);
    ModelInputs in = decoder_inputs();
    const Tensor base = logits(m, in);
    in.position_offset = 5;
    test::expect_close(logits(m, in), base, 1e-4, 1e-5, std::string("offset 5, ") + to_string(pos));
  }
}
