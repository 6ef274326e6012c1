// Training subsystem: optimisers against hand-computed updates, schedules, clipping, the train
// config parser, checkpoint round trips and rejection, classification scores and BLEU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "support/test_support.h"
#include "tfm/tfm.h"
#include "tfm/train.h"
#include "train/sharded_checkpoint.h"
#include "train/train_internal.h"
#include "support/train_helpers.h"

using namespace tfm;
namespace fs = std::filesystem;
using namespace tfm::train_test;

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
  e = expect_error([&] { parse_train_config("{" + ok + R"(, "tokenizer": {"kind": "char", "isolate_cjk": true}})", "c.json"); });
  EXPECT_NE(e.find("isolate_cjk applies to kind \"bpe\" only"), std::string::npos) << e;
  EXPECT_TRUE(parse_train_config("{" + ok + R"(, "tokenizer": {"kind": "bpe", "isolate_cjk": true}})", "c.json")
                  .tokenizer_isolate_cjk);
  e = expect_error([&] { parse_train_config("{ not json", "c.json"); });
  EXPECT_NE(e.find("not valid JSON"), std::string::npos) << e;
  e = expect_error([&] { parse_train_config("{" + ok + R"(, "training": {"ctc_weight": 0.3}})", "c.json"); });
  EXPECT_NE(e.find("[c.json.training.ctc_weight] applies to task \"speech\" only"), std::string::npos) << e;
  const std::string speech = R"("task": "speech", "model": {"model_type": "whisper"}, "data": {"train": "a.tsv", "test": "b.tsv"})";
  EXPECT_DOUBLE_EQ(parse_train_config("{" + speech + R"(, "training": {"ctc_weight": 0.3}})", "c.json").ctc_weight, 0.3);
  e = expect_error([&] { parse_train_config("{" + speech + R"(, "training": {"ctc_weight": 1.5}})", "c.json"); });
  EXPECT_NE(e.find("ctc_weight"), std::string::npos) << e;
  e = expect_error([&] {
    parse_train_config("{" + speech + R"(, "training": {"ctc_weight": 0.3}, "distributed": {"pipeline_parallel": 2}})", "c.json");
  });
  EXPECT_NE(e.find("not supported with tensor or pipeline parallelism"), std::string::npos) << e;
  const std::string speech_data = R"("task": "speech", "model": {"model_type": "whisper"}, "data": {"train": "a.tsv", "test": "b.tsv", )";
  const TrainConfig hop = parse_train_config("{" + speech_data + R"("hop_length": 320, "pack_fraction": 0.5}})", "c.json");
  EXPECT_EQ(hop.hop_length, 320);
  EXPECT_DOUBLE_EQ(hop.pack_fraction, 0.5);
  e = expect_error([&] { parse_train_config("{" + speech_data + R"("hop_length": 401}})", "c.json"); });
  EXPECT_NE(e.find("[c.json.data.hop_length]"), std::string::npos) << e;
  e = expect_error([&] { parse_train_config("{" + speech_data + R"("pack_fraction": 2}})", "c.json"); });
  EXPECT_NE(e.find("[c.json.data.pack_fraction]"), std::string::npos) << e;
  e = expect_error([&] {
    parse_train_config(R"({"model": {"model_type": "gpt2"}, "data": {"train": "t.txt", "pack_fraction": 0.5}})", "c.json");
  });
  EXPECT_NE(e.find("pack_fraction] applies to task \"speech\" only"), std::string::npos) << e;
}

// What a checkpoint holds after one optimiser step of a tiny model (step 5 of a run).
ModelConfig tiny_lm_config() {
  ModelConfig mc;
  mc.vocab_size = 40, mc.d_model = 16, mc.n_heads = 2, mc.n_layers = 1, mc.d_ff = 32, mc.max_positions = 16;
  return mc;
}
struct SavedRun {
  ModelConfig mc = tiny_lm_config();
  Model m = Model::create(mc, 3);
  Optimizer opt{OptimizerConfig{}};
  Tokenizer tok;
  TrainState st;
};
SavedRun saved_run() {
  SavedRun r;
  for (auto& [name, p] : r.m.parameters()) p.requires_grad_();
  for (auto& [k, p] : r.m.parameters()) autograd::accumulate(p, Tensor::randn(p.shape(), 9));
  r.opt.step(r.m.parameters(), 0.01);
  TokenizerTrainOptions to;
  to.kind = TokenizerKind::char_level;
  r.tok = Tokenizer::train({"hello world, the quick brown fox"}, to);
  r.st.step = 5, r.st.seed = 11, r.st.data_cursor = 123, r.st.threads = 2, r.st.train_config_json = R"({"a":1})";
  return r;
}

TEST(Checkpoint, RoundTripIsBitExactAndDefectsAreRejected) {
  const std::string dir = tmp_dir("ckpt");
  SavedRun r = saved_run();
  ModelConfig& mc = r.mc;
  Model& m = r.m;
  Optimizer& opt = r.opt;
  const Tokenizer& tok = r.tok;
  TrainState& st = r.st;
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

  // A save killed between its two directory renames leaves checkpoint.old: it is used.
  fs::rename(dir + "/checkpoint", dir + "/checkpoint.old");
  fs::create_directories(dir + "/checkpoint.tmp");
  write_file_atomic(dir + "/checkpoint.tmp/model.safetensors", "partial");
  EXPECT_EQ(load_checkpoint(dir).state.step, 5);
  fs::rename(dir + "/checkpoint.old", dir + "/checkpoint");
  // A model file from another step (replaced by hand) is named, not resumed from.
  const std::string model_bytes = read_file(dir + "/model.safetensors");
  st.step = 6;
  save_checkpoint(dir + "/other", m, tok, opt, st);
  fs::copy_file(dir + "/other/checkpoint/model.safetensors", dir + "/checkpoint/model.safetensors",
                fs::copy_options::overwrite_existing);
  EXPECT_NE(expect_error([&] { load_checkpoint(dir); }).find("mixes steps"), std::string::npos);
  EXPECT_NE(expect_error([&] { load_checkpoint(dir + "/other/checkpoint"); }).find("no checkpoint"), std::string::npos);
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

// A model-parallel run's checkpoint, written by a group of one (the layout is the same for N
// ranks: tests/cli/mpi_*_parallel_train.sh): the sharded set round-trips bit for bit, replaces
// an earlier single file in the inference copy, and a shard from another step is named.
TEST(Checkpoint, ShardedSetRoundTripsAndReplacesTheSingleFile) {
  const std::string dir = tmp_dir("ckpt-sharded");
  SavedRun r = saved_run();
  save_checkpoint(dir, r.m, r.tok, r.opt, r.st);  // one process first: model.safetensors
  ASSERT_TRUE(fs::exists(dir + "/model.safetensors"));
  r.st.step = 6;
  const train_detail::CheckpointPart all{r.mc, r.m.parameters(), r.opt.state(), r.opt.steps_taken()};
  train_detail::save_sharded_checkpoint(dir, dist::world(), all, r.tok, r.st);
  for (const char* f : {"model-00001-of-00001.safetensors", "model.safetensors.index.json",
                        "optimizer-00001-of-00001.safetensors", "optimizer.safetensors.index.json", "train_state.json"})
    EXPECT_TRUE(fs::exists(dir + "/checkpoint/" + f)) << f;
  EXPECT_FALSE(fs::exists(dir + "/model.safetensors"));  // it would hide the set from load_model_dir
  EXPECT_FALSE(fs::exists(dir + "/checkpoint.tmp"));
  const LoadedCheckpoint ck = load_checkpoint(dir);
  EXPECT_EQ(ck.state.step, 6);
  EXPECT_EQ(ck.optimizer_steps, 1);
  for (const auto& [k, p] : r.m.parameters()) test::expect_bitwise_equal(ck.model.model.parameters().at(k), p, k);
  for (const auto& [k, t] : r.opt.state()) test::expect_bitwise_equal(ck.optimizer_state.at(k), t, k);
  const LoadedModel copy = load_model_dir(dir);  // the inference copy
  for (const auto& [k, p] : r.m.parameters()) test::expect_bitwise_equal(copy.model.parameters().at(k), p, k);
  // Back to one process: the shards leave the inference copy.
  r.st.step = 7;
  save_checkpoint(dir, r.m, r.tok, r.opt, r.st);
  EXPECT_TRUE(fs::exists(dir + "/model.safetensors"));
  EXPECT_FALSE(fs::exists(dir + "/model-00001-of-00001.safetensors"));
  EXPECT_FALSE(fs::exists(dir + "/model.safetensors.index.json"));
  // A shard from another step is named.
  train_detail::save_sharded_checkpoint(dir + "/a", dist::world(), all, r.tok, r.st);
  r.st.step = 8;
  train_detail::save_sharded_checkpoint(dir + "/b", dist::world(), all, r.tok, r.st);
  fs::copy_file(dir + "/b/checkpoint/optimizer-00001-of-00001.safetensors",
                dir + "/a/checkpoint/optimizer-00001-of-00001.safetensors", fs::copy_options::overwrite_existing);
  const std::string e = expect_error([&] { load_checkpoint(dir + "/a"); });
  EXPECT_NE(e.find("mixes steps"), std::string::npos) << e;
  EXPECT_NE(e.find("optimizer-00001-of-00001.safetensors"), std::string::npos) << e;
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

TEST(TrainConfigParse, BleuTokenizerIsChecked) {
  // eval.bleu_tokenize: auto (zh for Chinese targets, else 13a) or one of sacreBLEU's names.
  const std::string base = R"({"task": "seq2seq", "model": {"preset": "vaswani"}, "data": {"train": "x.tsv"}, "eval": )";
  EXPECT_EQ(parse_train_config(base + "{}}", "c.json").bleu_tokenize, "auto");
  EXPECT_EQ(parse_train_config(base + R"({"bleu_tokenize": "intl"}})", "c.json").bleu_tokenize, "intl");
  try {
    parse_train_config(base + R"({"bleu_tokenize": "13b"}})", "c.json");
    FAIL() << "13b accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("c.json.eval.bleu_tokenize"), std::string::npos) << e.what();
  }
}
