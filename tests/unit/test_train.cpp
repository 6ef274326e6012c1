// Training subsystem: optimisers against hand-computed updates, schedules, clipping, the train
// config parser, checkpoint round trips and rejection, and short LM runs (loss goes down,
// resume equals an uninterrupted run, NaN stops with the step named).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "support/test_support.h"
#include "tfm/tfm.h"
#include "tfm/train.h"
#include "train/train_internal.h"

using namespace tfm;
namespace fs = std::filesystem;

namespace {

std::string tmp_dir(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("tfm_train_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p.string();
}

std::string expect_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected tfm::Error";
  return "";
}

// A tiny char-level LM config on the first 40k characters of tiny Shakespeare.
TrainConfig tiny_lm(const std::string& dir) {
  const char* src = std::getenv("TFM_SOURCE_DIR");
  const std::string text = read_file(std::string(src ? src : ".") + "/data/tinyshakespeare.txt").substr(0, 40000);
  write_file_atomic(dir + "/text.txt", text);
  return parse_train_config(R"({"seed": 7,
    "model": {"architecture": "decoder_only", "d_model": 32, "n_heads": 2, "n_layers": 2, "d_ff": 64,
              "max_positions": 32, "dropout": 0.1, "attention_dropout": 0.1, "embedding_dropout": 0.1},
    "data": {"train": ")" + dir + R"(/text.txt", "block_size": 32},
    "optimizer": {"lr": 0.005, "weight_decay": 0.1},
    "schedule": {"name": "cosine", "warmup_steps": 2},
    "training": {"batch_size": 8, "grad_accum": 2, "max_steps": 8, "clip_grad_norm": 1.0, "label_smoothing": 0.05},
    "eval": {"every": 4, "batches": 2, "log_every": 2},
    "sample": {"prompt": "ROMEO:", "tokens": 20}})", "tiny.json");
}

}  // namespace

TEST(Optimizer, AdamWMatchesTheFormulaWithBiasCorrection) {
  OptimizerConfig oc;
  oc.lr = 0.1, oc.beta1 = 0.9, oc.beta2 = 0.99, oc.eps = 1e-8, oc.weight_decay = 0.5;
  std::map<std::string, Tensor> ps{{"w", Tensor::from_floats({1.0f, -2.0f}, {1, 2}).requires_grad_()},
                                   {"b", Tensor::from_floats({0.5f}, {1}).requires_grad_()}};
  Optimizer opt(oc);
  double w[2] = {1, -2}, b = 0.5, mw[2] = {0, 0}, vw[2] = {0, 0}, mb = 0, vb = 0;
  for (int step = 1; step <= 3; ++step) {
    const float gw[2] = {0.3f * step, -0.1f}, gb = 0.2f;
    autograd::accumulate(ps["w"], Tensor::from_floats({gw[0], gw[1]}, {1, 2}));
    autograd::accumulate(ps["b"], Tensor::from_floats({gb}, {1}));
    opt.step(ps, oc.lr);
    for (auto& [k, p] : ps) p.zero_grad();
    const double bc1 = 1 - std::pow(0.9, step), bc2 = 1 - std::pow(0.99, step);
    for (int i = 0; i < 2; ++i) {  // decayed: a 2-D weight
      w[i] *= 1 - 0.1 * 0.5;
      mw[i] = 0.9 * mw[i] + 0.1 * gw[i];
      vw[i] = 0.99 * vw[i] + 0.01 * gw[i] * gw[i];
      w[i] -= 0.1 / bc1 * mw[i] / (std::sqrt(vw[i]) / std::sqrt(bc2) + 1e-8);
    }
    mb = 0.9 * mb + 0.1 * gb;  // a 1-D bias: no decay
    vb = 0.99 * vb + 0.01 * gb * gb;
    b -= 0.1 / bc1 * mb / (std::sqrt(vb) / std::sqrt(bc2) + 1e-8);
  }
  const auto got_w = ps["w"].to_floats();
  EXPECT_NEAR(got_w[0], w[0], 1e-6);
  EXPECT_NEAR(got_w[1], w[1], 1e-6);
  EXPECT_NEAR(ps["b"].item(), b, 1e-6);
  EXPECT_EQ(opt.steps_taken(), 3);
}

TEST(Optimizer, WeightDecayGroupsByName) {
  OptimizerConfig oc;
  EXPECT_TRUE(decays(oc, "transformer.h.0.attn.c_attn.weight", {16, 48}));
  EXPECT_FALSE(decays(oc, "transformer.h.0.attn.c_attn.bias", {48}));
  EXPECT_FALSE(decays(oc, "transformer.ln_f.weight", {16}));
  EXPECT_FALSE(decays(oc, "transformer.wte.weight", {31, 16}));
  EXPECT_FALSE(decays(oc, "embed_tokens.weight", {31, 16}));
  EXPECT_FALSE(decays(oc, "bert.embeddings.word_embeddings.weight", {31, 16}));
  oc.no_decay.clear();
  EXPECT_TRUE(decays(oc, "transformer.wte.weight", {31, 16}));
}

TEST(Optimizer, SgdMomentumAndNesterov) {
  for (bool nesterov : {false, true}) {
    OptimizerConfig oc;
    oc.kind = OptimizerKind::sgd;
    oc.momentum = 0.9, oc.nesterov = nesterov, oc.weight_decay = 0.1;
    std::map<std::string, Tensor> ps{{"w", Tensor::from_floats({1.0f}, {1, 1}).requires_grad_()}};
    Optimizer opt(oc);
    double w = 1, buf = 0;
    for (int step = 0; step < 3; ++step) {
      const float g = 0.5f - 0.2f * step;
      autograd::accumulate(ps["w"], Tensor::from_floats({g}, {1, 1}));
      opt.step(ps, 0.1);
      ps["w"].zero_grad();
      const double d = g + 0.1 * w;
      buf = step == 0 ? d : 0.9 * buf + d;
      w -= 0.1 * (nesterov ? d + 0.9 * buf : buf);
    }
    EXPECT_NEAR(ps["w"].item(), w, 1e-6) << "nesterov " << nesterov;
  }
}

TEST(Optimizer, StateRoundTripAndMismatch) {
  std::map<std::string, Tensor> ps{{"w", Tensor::randn({3, 4}, 1).requires_grad_()}};
  Optimizer a(OptimizerConfig{});
  autograd::accumulate(ps["w"], Tensor::randn({3, 4}, 2));
  a.step(ps, 0.01);
  Optimizer b(OptimizerConfig{});
  b.load_state(a.state(), a.steps_taken(), ps);
  EXPECT_EQ(b.steps_taken(), 1);
  test::expect_bitwise_equal(b.state().at("exp_avg_sq.w"), a.state().at("exp_avg_sq.w"), "v");
  std::map<std::string, Tensor> other{{"w", Tensor::randn({4, 3}, 1)}};
  EXPECT_NE(expect_error([&] { b.load_state(a.state(), 1, other); }).find("exp_avg"), std::string::npos);
}

TEST(Schedule, WarmupCosineInverseSqrtConstant) {
  ScheduleConfig s;
  s.kind = ScheduleKind::cosine, s.warmup_steps = 10, s.min_lr_ratio = 0.1;
  EXPECT_DOUBLE_EQ(learning_rate(s, 1.0, 0, 100), 0.1);
  EXPECT_DOUBLE_EQ(learning_rate(s, 1.0, 9, 100), 1.0);
  EXPECT_NEAR(learning_rate(s, 1.0, 99, 100), 0.1, 1e-12);
  EXPECT_NEAR(learning_rate(s, 1.0, 54, 100), 0.55, 1e-12);  // half way: (1 + 0.1) / 2
  s.kind = ScheduleKind::inverse_sqrt;
  EXPECT_NEAR(learning_rate(s, 1.0, 9, 100), 1.0, 1e-12);
  EXPECT_NEAR(learning_rate(s, 1.0, 39, 100), 0.5, 1e-12);  // sqrt(10/40)
  EXPECT_NEAR(learning_rate(s, 1.0, 4, 100), 0.5, 1e-12);   // warm-up 5/10
  s.kind = ScheduleKind::constant;
  EXPECT_DOUBLE_EQ(learning_rate(s, 2.0, 50, 100), 2.0);
}

TEST(Clip, GlobalNormScalesEveryGradient) {
  std::map<std::string, Tensor> ps{{"a", Tensor::zeros({2}).requires_grad_()}, {"b", Tensor::zeros({1}).requires_grad_()}};
  autograd::accumulate(ps["a"], Tensor::from_floats({3, 0}, {2}));
  autograd::accumulate(ps["b"], Tensor::from_floats({4}, {1}));
  EXPECT_DOUBLE_EQ(clip_grad_norm(ps, 10.0), 5.0);  // under the limit: unchanged
  EXPECT_FLOAT_EQ(ps["b"].grad().item(), 4.0f);
  EXPECT_DOUBLE_EQ(clip_grad_norm(ps, 1.0), 5.0);
  EXPECT_NEAR(ps["a"].grad().to_floats()[0], 0.6, 1e-6);
  EXPECT_NEAR(ps["b"].grad().item(), 0.8, 1e-6);
}

TEST(TrainConfigParse, RejectsUnknownKeysAndBadValues) {
  const std::string ok = R"("model": {"architecture": "decoder_only"}, "data": {"train": "x.txt"})";
  EXPECT_NO_THROW(parse_train_config("{" + ok + "}", "c.json"));
  std::string e = expect_error([&] { parse_train_config("{" + ok + R"(, "optimiser": {}})", "c.json"); });
  EXPECT_NE(e.find("unknown key 'optimiser'"), std::string::npos) << e;
  EXPECT_NE(e.find("optimizer"), std::string::npos) << e;  // the allowed list
  e = expect_error([&] { parse_train_config("{" + ok + R"(, "optimizer": {"lr": -1}})", "c.json"); });
  EXPECT_NE(e.find("c.json.optimizer.lr"), std::string::npos) << e;
  e = expect_error([&] { parse_train_config("{" + ok + R"(, "schedule": {"name": "linear"}})", "c.json"); });
  EXPECT_NE(e.find("cosine"), std::string::npos) << e;
  e = expect_error([&] { parse_train_config(R"({"data": {"train": "x"}})", "c.json"); });
  EXPECT_NE(e.find("model"), std::string::npos) << e;
  e = expect_error([&] { parse_train_config("{ not json", "c.json"); });
  EXPECT_NE(e.find("not valid JSON"), std::string::npos) << e;
}

TEST(Checkpoint, RoundTripIsBitExactAndDefectsAreRejected) {
  const std::string dir = tmp_dir("ckpt");
  ModelConfig mc;
  mc.vocab_size = 40, mc.d_model = 16, mc.n_heads = 2, mc.n_layers = 1, mc.d_ff = 32, mc.max_positions = 16;
  Model m = trainable(Model::create(mc, 3));
  for (auto& [k, p] : m.parameters()) autograd::accumulate(p, Tensor::randn(p.shape(), 9));
  Optimizer opt(OptimizerConfig{});
  opt.step(m.parameters(), 0.01);
  TokenizerTrainOptions to;
  to.kind = TokenizerKind::char_level;
  const Tokenizer tok = Tokenizer::train({"hello world, the quick brown fox"}, to);
  TrainState st;
  st.step = 5, st.seed = 11, st.data_cursor = 123, st.threads = 2, st.train_config_json = R"({"a":1})";
  save_checkpoint(dir, m, tok, opt, st);
  const LoadedCheckpoint ck = load_checkpoint(dir);
  EXPECT_EQ(ck.state.step, 5);
  EXPECT_EQ(ck.state.data_cursor, 123);
  EXPECT_EQ(ck.optimizer_steps, 1);
  EXPECT_EQ(model_config_to_json(ck.model.config), model_config_to_json(mc));
  EXPECT_EQ(ck.model.tokenizer.to_json(), tok.to_json());
  for (const auto& [k, p] : m.parameters())
    test::expect_bitwise_equal(ck.model.model.parameters().at(k), p, k);
  for (const auto& [k, t] : opt.state()) test::expect_bitwise_equal(ck.optimizer_state.at(k), t, k);

  // A model file from another step (a save cut short between renames) is named.
  const std::string model_bytes = read_file(dir + "/model.safetensors");
  st.step = 6;
  save_checkpoint(dir + "/other", m, tok, opt, st);
  fs::copy_file(dir + "/other/model.safetensors", dir + "/model.safetensors", fs::copy_options::overwrite_existing);
  EXPECT_NE(expect_error([&] { load_checkpoint(dir); }).find("mixes steps"), std::string::npos);
  // Truncated and corrupted weights.
  write_file_atomic(dir + "/model.safetensors", model_bytes.substr(0, model_bytes.size() - 10));
  EXPECT_NE(expect_error([&] { load_model_dir(dir); }).find("model.safetensors"), std::string::npos);
  std::string bad = model_bytes;
  bad[0] = '\xff', bad[3] = '\x7f';  // absurd header length
  write_file_atomic(dir + "/model.safetensors", bad);
  EXPECT_NE(expect_error([&] { load_model_dir(dir); }).find("model.safetensors"), std::string::npos);
  // Weights that do not fit config.json.
  write_file_atomic(dir + "/model.safetensors", model_bytes);
  mc.d_ff = 48;
  write_file_atomic(dir + "/config.json", model_config_to_json(mc));
  EXPECT_NE(expect_error([&] { load_model_dir(dir); }).find("does not match config.json"), std::string::npos);
  fs::remove_all(dir);
}

TEST(TrainLm, LossFallsAndResumeEqualsUninterrupted) {
  const std::string dir = tmp_dir("lm");
  const TrainConfig cfg = tiny_lm(dir);
  TrainOptions o;
  o.quiet = true;
  o.out_dir = dir + "/full";
  const TrainResult full = run_training(cfg, o);
  ASSERT_EQ(full.losses.size(), 8u);
  EXPECT_LT(full.losses.back(), full.losses.front() - 0.3) << "loss did not fall";
  EXPECT_FALSE(full.sample.empty());
  EXPECT_TRUE(fs::exists(o.out_dir + "/curves.svg"));
  EXPECT_NE(read_file(o.out_dir + "/curves.svg").find("<polyline"), std::string::npos);
  EXPECT_NE(read_file(o.out_dir + "/metrics.jsonl").find(R"("split":"val")"), std::string::npos);

  // Stopped after step 3 (as Ctrl-C does), then resumed: the same losses, bit for bit.
  TrainOptions a = o;
  a.out_dir = dir + "/part";
  a.on_step = [](std::int64_t step, double) { return step < 3; };
  const TrainResult first = run_training(cfg, a);
  EXPECT_TRUE(first.interrupted);
  ASSERT_EQ(first.losses.size(), 3u);
  TrainOptions b = o;
  b.out_dir = a.out_dir;
  b.resume_dir = a.out_dir;
  const TrainResult rest = run_training(cfg, b);
  ASSERT_EQ(rest.losses.size(), 5u);
  std::vector<double> joined = first.losses;
  joined.insert(joined.end(), rest.losses.begin(), rest.losses.end());
  for (std::size_t i = 0; i < joined.size(); ++i) EXPECT_EQ(joined[i], full.losses[i]) << "step " << i + 1;
  EXPECT_EQ(rest.val_loss, full.val_loss);
  const LoadedModel x = load_model_dir(o.out_dir), y = load_model_dir(a.out_dir);
  for (const auto& [k, p] : x.model.parameters()) test::expect_bitwise_equal(y.model.parameters().at(k), p, k);
  fs::remove_all(dir);
}

TEST(TrainLm, SameLossesAtOneAndTwoThreads) {
  const std::string dir = tmp_dir("det");
  TrainConfig cfg = tiny_lm(dir);
  cfg.max_steps = 3;
  cfg.sample_tokens = 0;
  TrainOptions o;
  o.quiet = true;
  const int threads = num_threads();
  o.out_dir = dir + "/a";
  set_num_threads(1);
  const TrainResult r1 = run_training(cfg, o);
  o.out_dir = dir + "/b";
  set_num_threads(2);
  const TrainResult r2 = run_training(cfg, o);
  set_num_threads(threads);
  EXPECT_EQ(r1.losses, r2.losses);
  fs::remove_all(dir);
}

TEST(TrainLm, FaultsAreClearErrors) {
  const std::string dir = tmp_dir("faults");
  TrainConfig cfg = tiny_lm(dir);
  TrainOptions o;
  o.quiet = true;
  o.out_dir = dir + "/out";
  TrainConfig missing = cfg;
  missing.train_file = dir + "/nope.txt";
  EXPECT_NE(expect_error([&] { run_training(missing, o); }).find("not found"), std::string::npos);
  TrainConfig big = cfg;
  big.batch_size = 5000;
  EXPECT_NE(expect_error([&] { run_training(big, o); }).find("too few for one batch"), std::string::npos);
  EXPECT_FALSE(fs::exists(o.out_dir)) << "work started before the checks";
  TrainConfig nan = cfg;
  nan.optimizer.lr = 1e30;
  nan.clip_grad_norm = 0;
  nan.schedule.warmup_steps = 0;
  const std::string e = expect_error([&] { run_training(nan, o); });
  EXPECT_NE(e.find("step "), std::string::npos) << e;
  EXPECT_NE(e.find("stopped"), std::string::npos) << e;
  fs::remove_all(dir);
}

TEST(TrainClassifier, LearnsSpamAndScoresTheTestSplit) {
  const std::string dir = tmp_dir("cls");
  const char* src = std::getenv("TFM_SOURCE_DIR");
  TrainConfig cfg = load_train_config(std::string(src ? src : ".") + "/configs/sms-spam-bert.json");
  cfg.train_file = std::string(src ? src : ".") + "/data/sms-spam.tsv";
  cfg.max_steps = 30;
  cfg.eval_every = 30;
  cfg.schedule.warmup_steps = 5;
  cfg.optimizer.lr = 3e-3;
  TrainOptions o;
  o.quiet = true;
  o.out_dir = dir + "/out";
  const TrainResult r = run_training(cfg, o);
  ASSERT_EQ(r.losses.size(), 30u);
  double first = 0, last = 0;
  for (int i = 0; i < 5; ++i) first += r.losses[static_cast<std::size_t>(i)], last += r.losses[r.losses.size() - 1 - static_cast<std::size_t>(i)];
  EXPECT_LT(last, first) << "loss did not fall";
  // 13% of the messages are spam: beating the all-ham baseline needs real recall.
  EXPECT_GT(r.val_metrics.at("accuracy"), 0.87);
  EXPECT_GT(r.val_metrics.at("f1"), 0.0);
  EXPECT_NE(read_file(o.out_dir + "/metrics.jsonl").find(R"("f1":)"), std::string::npos);
  const LoadedModel m = load_model_dir(o.out_dir);
  EXPECT_EQ(m.config.head, HeadKind::classifier);
  fs::remove_all(dir);
}

TEST(TrainClassifier, ScoresByHand) {
  const auto s = train_detail::class_scores({1, 1, 0, 0, 1}, {1, 0, 0, 1, 1}, 1);
  EXPECT_DOUBLE_EQ(s.accuracy, 0.6);        // 3 of 5
  EXPECT_DOUBLE_EQ(s.precision, 2.0 / 3.0);  // tp 2, fp 1
  EXPECT_DOUBLE_EQ(s.recall, 2.0 / 3.0);     // tp 2, fn 1
  EXPECT_DOUBLE_EQ(s.f1, 2.0 / 3.0);
  const auto none = train_detail::class_scores({0, 0}, {0, 0}, 1);
  EXPECT_DOUBLE_EQ(none.accuracy, 1.0);
  EXPECT_DOUBLE_EQ(none.f1, 0.0);
}

TEST(TrainSeq2Seq, BleuFollowsSacreBleu) {
  using train_detail::bleu_tokens;
  using train_detail::corpus_bleu;
  EXPECT_NEAR(corpus_bleu({bleu_tokens("the cat sat on the mat")}, {bleu_tokens("the cat is on the mat")}),
              100.0 * std::pow(5.0 / 6 * 3.0 / 5 * 1.0 / 4 * 1.0 / 6, 0.25), 1e-9);  // p4 = 0 -> 1/(2*3)
  EXPECT_NEAR(corpus_bleu({bleu_tokens("我爱你。")}, {bleu_tokens("我爱你。")}), 100.0, 1e-9);
  EXPECT_EQ(bleu_tokens("我爱 you, Tom."), (std::vector<std::string>{"我", "爱", "you", ",", "Tom", "."}));
  // Brevity penalty: a 3-token hypothesis against a 6-token reference.
  EXPECT_NEAR(corpus_bleu({bleu_tokens("a b c d")}, {bleu_tokens("a b c d e f g h")}), 100.0 * std::exp(1.0 - 8.0 / 4),
              1e-9);
}

TEST(TrainSeq2Seq, EnglishToChineseLossFallsAndBleuIsScored) {
  const std::string dir = tmp_dir("s2s");
  const char* src = std::getenv("TFM_SOURCE_DIR");
  const std::string root = src ? src : ".";
  std::string text = read_file(root + "/data/cmn-eng.tsv");
  std::size_t cut = 0;
  for (int i = 0; i < 1500; ++i) cut = text.find('\n', cut) + 1;
  write_file_atomic(dir + "/pairs.tsv", text.substr(0, cut));
  TrainConfig cfg = load_train_config(root + "/configs/cmn-eng-transformer.json");
  cfg.train_file = dir + "/pairs.tsv";
  cfg.test_size = 100;
  cfg.bleu_examples = 20;
  cfg.batch_size = 16;
  cfg.max_steps = 12;
  cfg.eval_every = 12;
  cfg.schedule.warmup_steps = 4;
  cfg.optimizer.lr = 3e-3;
  TrainOptions o;
  o.quiet = true;
  o.out_dir = dir + "/out";
  const TrainResult r = run_training(cfg, o);
  ASSERT_EQ(r.losses.size(), 12u);
  EXPECT_LT(r.losses.back(), r.losses.front() - 0.5) << "loss did not fall";
  ASSERT_TRUE(r.val_metrics.count("bleu"));
  EXPECT_GE(r.val_metrics.at("bleu"), 0.0);
  EXPECT_LE(r.val_metrics.at("bleu"), 100.0);
  fs::remove_all(dir);
}

// Interrupt after step 3 and resume: the same losses, bit for bit, for the classifier's and
// the seq2seq task's data orders (seeded permutation; length-bucketed windows) too.
TEST(TrainResume, ClassifierAndSeq2SeqContinueExactly) {
  const char* src = std::getenv("TFM_SOURCE_DIR");
  const std::string root = src ? src : ".";
  for (const char* name : {"sms-spam-bert", "cmn-eng-transformer"}) {
    const std::string dir = tmp_dir(std::string("resume_") + name);
    TrainConfig cfg = load_train_config(root + "/configs/" + name + ".json");
    std::string text = read_file(root + "/" + cfg.train_file);
    std::size_t cut = 0;
    for (int i = 0; i < 600; ++i) cut = text.find('\n', cut) + 1;
    write_file_atomic(dir + "/data.tsv", text.substr(0, cut));
    cfg.train_file = dir + "/data.tsv";
    cfg.test_size = cfg.task == TaskKind::seq2seq ? 50 : 0;
    cfg.bleu_examples = 8;
    cfg.batch_size = 8;
    cfg.max_steps = 6;
    cfg.eval_every = 100;
    TrainOptions o;
    o.quiet = true;
    o.out_dir = dir + "/full";
    const TrainResult full = run_training(cfg, o);
    TrainOptions a = o;
    a.out_dir = dir + "/part";
    a.on_step = [](std::int64_t step, double) { return step < 3; };
    const TrainResult first = run_training(cfg, a);
    TrainOptions b = o;
    b.out_dir = b.resume_dir = a.out_dir;
    const TrainResult rest = run_training(cfg, b);
    std::vector<double> joined = first.losses;
    joined.insert(joined.end(), rest.losses.begin(), rest.losses.end());
    EXPECT_EQ(joined, full.losses) << name;
    EXPECT_EQ(rest.val_metrics, full.val_metrics) << name;
    fs::remove_all(dir);
  }
}
