// Training Fusion-in-Decoder (data.fusion): the passage index is built once into the model
// directory from the training pairs (a translation memory) and reused on resume; every example
// reads k parts, a training example never its own pair, a test example only training pairs;
// tfm eval's loss equals the training eval's; --no-retrieval (fusion reset) trains the plain model.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "support/train_helpers.h"
#include <nlohmann/json.hpp>

#include "tfm/chat_template.h"
#include "tfm/retrieval.h"
#include "tfm/tfm.h"
#include "tfm/train.h"
#include "train/task.h"
#include "train/train_internal.h"

using namespace tfm;
namespace fs = std::filesystem;
using namespace tfm::train_test;
using namespace tfm::train_detail;

namespace {

const char* kTemplate = "{{ prompt }} | {{ document.text }}";

// 80 pairs: sources share words in patterns, so neighbours are near but never equal.
std::string write_pairs(const std::string& dir) {
  std::string tsv;
  for (int i = 0; i < 80; ++i)
    tsv += "alpha" + std::to_string(i % 7) + " beta" + std::to_string(i % 5) + " gamma" + std::to_string(i) + "\tx" +
           std::to_string(i) + " y" + std::to_string(i % 3) + "\n";
  write_file_atomic(dir + "/pairs.tsv", tsv);
  return dir + "/pairs.tsv";
}

std::string seq2seq_config(const std::string& pairs, const std::string& fusion) {
  return R"({"task": "seq2seq", "seed": 5,
    "model": {"architecture": "encoder_decoder", "d_model": 32, "n_heads": 2, "n_layers": 1, "n_decoder_layers": 1,
              "d_ff": 64, "max_positions": 64, "position": "sinusoidal", "dropout": 0.0, "attention_dropout": 0.0,
              "embedding_dropout": 0.0},
    "tokenizer": {"kind": "word"},
    "data": {"train": ")" + pairs + R"(", "test_size": 10, "max_length": 40)" + fusion + R"(},
    "optimizer": {"lr": 0.005},
    "training": {"batch_size": 8, "max_steps": 4},
    "eval": {"every": 4, "log_every": 2, "bleu_examples": 4}})";
}

}  // namespace

TEST(TrainFusion, ExamplesReadTheirNearestPassagesButNeverTheirOwnPair) {
  const std::string dir = tmp_dir("fusion");
  const std::string pairs = write_pairs(dir);
  TrainOptions o;
  o.quiet = true;
  o.out_dir = dir + "/encoder";
  run_training(parse_train_config(seq2seq_config(pairs, ""), "enc.json"), o);  // any model's encoder finds passages

  const std::string fusion = R"(, "fusion": {"encoder": ")" + dir + R"(/encoder", "k": 3, "template": ")" + kTemplate + R"("})";
  const TrainConfig cfg = parse_train_config(seq2seq_config(pairs, fusion), "fid.json");
  ASSERT_TRUE(cfg.fusion);
  std::optional<Tokenizer> tok;
  TaskData d = make_task_data(cfg, tok);
  ASSERT_EQ(d.train_pairs.size(), 70u);
  ASSERT_EQ(d.test_pairs.size(), 10u);
  attach_fusion(cfg, d, *tok, dir + "/index", /*training=*/true);
  EXPECT_EQ(d.s2s->fused_parts(), 3);
  EXPECT_EQ(PassageIndex::open(dir + "/index").size(), 70);  // the training pairs only
  auto part = [&](const std::pair<std::string, std::string>& query, const std::pair<std::string, std::string>& passage) {
    const nlohmann::ordered_json doc = {{"text", passage.first + " = " + passage.second}};
    return pair_side(cfg, *tok, render_chat_template(kTemplate, {{"prompt", query.first}, {"document", doc}}));
  };
  auto reads = [&](const PairExample& e, const std::vector<std::int32_t>& p) {
    return std::find(e.parts.begin(), e.parts.end(), p) != e.parts.end();
  };
  for (std::size_t i = 0; i < d.train_pairs.size(); ++i) {
    const PairExample& e = d.s2s->train_examples()[i];
    ASSERT_EQ(e.parts.size(), 3u);
    EXPECT_FALSE(reads(e, part(d.train_pairs[i], d.train_pairs[i]))) << "training example " << i << " reads its own pair";
    std::size_t found = 0;  // each part is the source with some other training pair
    for (std::size_t j = 0; j < d.train_pairs.size(); ++j) found += reads(e, part(d.train_pairs[i], d.train_pairs[j]));
    EXPECT_EQ(found, 3u) << "training example " << i;
  }
  for (std::size_t i = 0; i < d.test_pairs.size(); ++i) {
    const PairExample& e = d.s2s->test_examples()[i];
    std::size_t found = 0;
    for (std::size_t j = 0; j < d.train_pairs.size(); ++j) found += reads(e, part(d.test_pairs[i], d.train_pairs[j]));
    EXPECT_EQ(found, 3u) << "test example " << i << " reads other than training pairs";
  }
  // A batch holds each example's parts in turn.
  Tensor src, lens, dec, labels;
  d.s2s->train_batch(0, 4, src, lens, dec, labels);
  EXPECT_EQ(src.size(0), 12);
  EXPECT_EQ(lens.numel(), 12);
  EXPECT_EQ(dec.size(0), 4);
}

TEST(TrainFusion, TrainsKeepsItsIndexOnResumeAndEvaluatesAsItTrained) {
  const std::string dir = tmp_dir("fusion_run");
  const std::string pairs = write_pairs(dir);
  TrainOptions o;
  o.quiet = true;
  o.out_dir = dir + "/encoder";
  run_training(parse_train_config(seq2seq_config(pairs, ""), "enc.json"), o);
  const std::string fusion = R"(, "fusion": {"encoder": ")" + dir + R"(/encoder", "k": 2})";
  TrainConfig cfg = parse_train_config(seq2seq_config(pairs, fusion), "fid.json");
  o.out_dir = dir + "/fid";
  const TrainResult r = run_training(cfg, o);
  ASSERT_EQ(r.losses.size(), 4u);
  EXPECT_TRUE(std::isfinite(r.val_loss));
  ASSERT_TRUE(PassageIndex::complete(o.out_dir + "/fusion_index"));
  ASSERT_TRUE(fs::exists(o.out_dir + "/fusion.json"));
  const auto built = fs::last_write_time(o.out_dir + "/fusion_index/index.faiss");
  // tfm eval re-reads the held-out split with the same passages: the same loss.
  const EvalReport rep = evaluate_model_dir(o.out_dir, {});
  EXPECT_NEAR(rep.metrics.at("loss"), r.val_loss, 1e-6);
  // Resumed, the index is the one built before.
  cfg.max_steps = 6;
  o.resume_dir = o.out_dir;
  const TrainResult more = run_training(cfg, o);
  EXPECT_EQ(more.losses.size(), 2u);
  EXPECT_EQ(fs::last_write_time(o.out_dir + "/fusion_index/index.faiss"), built);
  // Without fusion: the plain model, no index, a train_config.json without data.fusion.
  cfg.fusion.reset();
  cfg.max_steps = 4;
  o.resume_dir.clear();
  o.out_dir = dir + "/plain";
  run_training(cfg, o);
  EXPECT_FALSE(fs::exists(o.out_dir + "/fusion_index"));
  EXPECT_FALSE(fs::exists(o.out_dir + "/fusion.json"));
  EXPECT_FALSE(nlohmann::json::parse(read_file(o.out_dir + "/train_config.json"))["data"].contains("fusion"));
}

TEST(TrainFusion, BadFusionBlocksAreOneLineErrors) {
  const std::string dir = tmp_dir("fusion_bad");
  const std::string pairs = write_pairs(dir);
  EXPECT_NE(expect_error([&] { parse_train_config(seq2seq_config(pairs, R"(, "fusion": {"k": 2})"), "f.json"); })
                .find("data.fusion.encoder"),
            std::string::npos);
  EXPECT_NE(expect_error([&] { parse_train_config(seq2seq_config(pairs, R"(, "fusion": {"encoder": "e", "kk": 2})"), "f.json"); })
                .find("unknown key 'kk'"),
            std::string::npos);
  EXPECT_NE(expect_error([&] {
              parse_train_config(R"({"model": {"d_model": 32}, "data": {"train": "t.txt", "fusion": {"encoder": "e"}}})", "lm.json");
            }).find("applies to task \"seq2seq\" only"),
            std::string::npos);
  TrainOptions o;
  o.quiet = true;
  o.out_dir = dir + "/fid";
  const std::string missing = R"(, "fusion": {"encoder": ")" + dir + R"(/nowhere"})";
  const std::string e = expect_error([&] { run_training(parse_train_config(seq2seq_config(pairs, missing), "fid.json"), o); });
  EXPECT_NE(e.find("data.fusion.encoder: '" + dir + "/nowhere' not found"), std::string::npos) << e;
}

TEST(TrainFusion, TheShippedExampleReadsTwoPassagesOfTheTranslationMemory) {
  const char* src = std::getenv("TFM_SOURCE_DIR");
  const TrainConfig cfg = load_train_config(std::string(src ? src : ".") + "/configs/cmn-eng-fid.json");
  ASSERT_TRUE(cfg.fusion);
  EXPECT_EQ(cfg.fusion->k, 2);
  EXPECT_TRUE(cfg.fusion->passages.empty());  // the training pairs themselves
  EXPECT_EQ(cfg.fusion->encoder, "runs/cmn-eng");
}
