// tfm eval's library side (evaluate_model_dir): a model directory's train_config.json
// reproduces the held-out split, so the CLI scores equal the training run's final eval bit for
// bit; --data files of each family; clear errors naming file:line.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include "tfm/safetensors.h"
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

// The first `lines` lines of a data file, written into dir.
std::string head_lines(const std::string& from, const std::string& to, int lines) {
  const std::string text = read_file(from);
  std::size_t cut = 0;
  for (int i = 0; i < lines; ++i) cut = text.find('\n', cut) + 1;
  write_file_atomic(to, text.substr(0, cut));
  return to;
}

}  // namespace

TEST(EvalModelDir, LmHeldOutSplitEqualsTheTrainingEval) {
  const std::string dir = tmp_dir("eval_lm");
  TrainConfig cfg = tiny_lm(dir);
  cfg.max_steps = 4;
  cfg.eval_every = 4;
  cfg.eval_batches = 1000;  // the training eval covers the whole held-out split, as tfm eval does
  cfg.sample_tokens = 0;
  TrainOptions o;
  o.quiet = true;
  o.out_dir = dir + "/out";
  const TrainResult r = run_training(cfg, o);
  ASSERT_TRUE(fs::exists(o.out_dir + "/train_config.json"));
  const EvalReport e = evaluate_model_dir(o.out_dir, {});
  EXPECT_EQ(e.task, TaskKind::lm);
  EXPECT_EQ(e.metrics.at("loss"), r.val_metrics.at("loss"));
  EXPECT_EQ(e.metrics.at("perplexity"), r.val_metrics.at("perplexity"));
  EXPECT_EQ(e.examples % 32, 0);

  // Any text file, in windows of --ctx tokens: every whole window is scored.
  write_file_atomic(dir + "/other.txt", read_file(dir + "/text.txt").substr(1000, 1000));
  EvalOptions eo;
  eo.data_file = dir + "/other.txt";
  eo.context = 16;
  eo.batch_size = 5;
  const EvalReport f = evaluate_model_dir(o.out_dir, eo);
  EXPECT_EQ(f.examples, 1000 / 17 * 16);
  EXPECT_TRUE(std::isfinite(f.metrics.at("loss")));
  EXPECT_NEAR(f.metrics.at("perplexity"), std::exp(f.metrics.at("loss")), 1e-9);

  eo.context = 64;  // beyond max_positions 32 of a learned position table
  EXPECT_NE(expect_error([&] { evaluate_model_dir(o.out_dir, eo); }).find("max_positions"), std::string::npos);
  eo.context = 0;
  eo.data_file = dir + "/missing.txt";
  EXPECT_NE(expect_error([&] { evaluate_model_dir(o.out_dir, eo); }).find("missing.txt' not found"), std::string::npos);
  EXPECT_NE(expect_error([&] { evaluate_model_dir(dir + "/nope", {}); }).find("no model directory"), std::string::npos);
  fs::remove_all(dir);
}

TEST(EvalModelDir, ClassifierScoresEqualTheTrainingEvalAndBadLinesNameFileAndLine) {
  const std::string dir = tmp_dir("eval_cls");
  TrainConfig cfg = load_train_config(root() + "/configs/sms-spam-bert.json");
  cfg.train_file = head_lines(root() + "/data/sms-spam.tsv", dir + "/data.tsv", 600);
  cfg.batch_size = 16;
  cfg.max_steps = 6;
  cfg.eval_every = 6;
  TrainOptions o;
  o.quiet = true;
  o.out_dir = dir + "/out";
  const TrainResult r = run_training(cfg, o);
  const EvalReport e = evaluate_model_dir(o.out_dir, {});
  EXPECT_EQ(e.task, TaskKind::classifier);
  EXPECT_EQ(e.positive_label, "spam");
  EXPECT_EQ(e.examples, static_cast<std::int64_t>(599 * 0.2));
  for (const char* k : {"loss", "accuracy", "precision", "recall", "f1"}) EXPECT_EQ(e.metrics.at(k), r.val_metrics.at(k)) << k;

  write_file_atomic(dir + "/eval.tsv", "ham\tok see you later\nspam\tWIN a FREE prize now, call 0800\r\nham\tfine\n");
  EvalOptions eo;
  eo.data_file = dir + "/eval.tsv";
  const EvalReport f = evaluate_model_dir(o.out_dir, eo);
  EXPECT_EQ(f.examples, 3);
  EXPECT_GE(f.metrics.at("accuracy"), 0.0);
  write_file_atomic(dir + "/bad.tsv", "ham\tok\nspam\tx\nno tab here\n");
  EXPECT_NE(expect_error([&] { evaluate_model_dir(o.out_dir, eo = EvalOptions{dir + "/bad.tsv"}); }).find("bad.tsv:3"),
            std::string::npos);
  write_file_atomic(dir + "/bad.tsv", "ham\tok\neggs\tx\n");
  const std::string msg = expect_error([&] { evaluate_model_dir(o.out_dir, EvalOptions{dir + "/bad.tsv"}); });
  EXPECT_NE(msg.find("bad.tsv:2"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'eggs'"), std::string::npos) << msg;
  fs::remove_all(dir);
}

TEST(EvalModelDir, Seq2SeqLossAndBleuEqualTheTrainingEval) {
  const std::string dir = tmp_dir("eval_s2s");
  TrainConfig cfg = load_train_config(root() + "/configs/cmn-eng-transformer.json");
  cfg.train_file = head_lines(root() + "/data/cmn-eng.tsv", dir + "/pairs.tsv", 120);
  cfg.test_size = 8;
  cfg.bleu_examples = 8;
  cfg.batch_size = 8;
  cfg.max_length = 24;
  cfg.max_steps = 1;
  cfg.eval_every = 1;
  TrainOptions o;
  o.quiet = true;
  o.out_dir = dir + "/out";
  const TrainResult r = run_training(cfg, o);
  const EvalReport e = evaluate_model_dir(o.out_dir, {});
  EXPECT_EQ(e.task, TaskKind::seq2seq);
  EXPECT_EQ(e.examples, 8);
  EXPECT_EQ(e.metrics.at("loss"), r.val_metrics.at("loss"));
  EXPECT_EQ(e.metrics.at("bleu"), r.val_metrics.at("bleu"));
  write_file_atomic(dir + "/bad.tsv", "Hi.\t你好。\nNo tab\n");
  EXPECT_NE(expect_error([&] { evaluate_model_dir(o.out_dir, EvalOptions{dir + "/bad.tsv"}); }).find("bad.tsv:2"),
            std::string::npos);
  fs::remove_all(dir);
}
