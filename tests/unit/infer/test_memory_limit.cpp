// --max-memory: the training memory plan against the allocator's measured peak of real steps,
// and training refused before anything is allocated when the plan exceeds the limit.
#include <gtest/gtest.h>

#include <filesystem>

#include "tfm/memory_plan.h"
#include "tfm/runtime.h"
#include "support/train_helpers.h"

using namespace tfm;
using namespace tfm::train_test;

namespace {

// Peak bytes held by tensors while training `cfg` for one step (and the eval after it).
std::int64_t measured_training_peak(TrainConfig cfg, const std::string& dir) {
  cfg.max_steps = 1;
  cfg.eval_every = 1;
  cfg.sample_tokens = 0;
  TrainOptions o;
  o.out_dir = dir + "/run";
  o.quiet = true;
  reset_peak_memory();
  const std::int64_t before = static_cast<std::int64_t>(memory_stats().current_bytes);
  run_training(cfg, o);
  return static_cast<std::int64_t>(memory_stats().peak_bytes) - before;
}

TrainConfig seq2seq_config(const std::string& dir) {
  std::string tsv;
  // Longer than max_length on both sides, so every batch is 16 x 48 tokens as the plan assumes.
  for (int i = 0; i < 200; ++i)
    tsv += "we go to the station number " + std::to_string(i) + " early in the morning\tnous allons a la gare " +
           std::to_string(i) + " tot le matin avec nos amis\n";
  write_file_atomic(dir + "/pairs.tsv", tsv);
  return parse_train_config(R"({"task": "seq2seq", "seed": 3,
    "model": {"model_type": "transformer", "architecture": "encoder_decoder", "position": "sinusoidal",
              "d_model": 32, "n_heads": 2, "n_layers": 2, "d_ff": 64, "max_positions": 48},
    "tokenizer": {"kind": "char"}, "data": {"train": ")" + dir + R"(/pairs.tsv", "test_size": 8, "max_length": 48},
    "training": {"batch_size": 16}, "eval": {"bleu_examples": 0}})", "s2s.json");
}

}  // namespace

TEST(MemoryLimit, TrainingPlanBoundsTheMeasuredPeak) {
  const std::string dir = tmp_dir("memplan");
  for (const char* task : {"lm", "seq2seq"}) {
    for (const bool checkpoint : {false, true}) {
      TrainConfig cfg = std::string(task) == "lm" ? tiny_lm(dir) : seq2seq_config(dir);
      cfg.checkpoint_activations = checkpoint;
      const std::int64_t peak = measured_training_peak(cfg, dir);
      const LoadedModel lm = load_model_dir(dir + "/run");
      const std::int64_t seq = cfg.task == TaskKind::lm ? cfg.block_size : cfg.max_length;
      const TrainingMemoryPlan p = plan_training_memory(lm.config, cfg.batch_size, seq, 2, checkpoint);
      std::printf("%s%s: measured peak %lld bytes, plan %lld (%s)\n", task, checkpoint ? " checkpointed" : "",
                  static_cast<long long>(peak), static_cast<long long>(p.total_bytes), summary(p).c_str());
      EXPECT_GE(p.total_bytes, peak) << task << " checkpoint " << checkpoint;
      EXPECT_LE(p.total_bytes, 2 * peak) << task << " checkpoint " << checkpoint;
      std::filesystem::remove_all(dir + "/run");
    }
  }
  std::filesystem::remove_all(dir);
}

TEST(MemoryLimit, TrainingIsRefusedBeforeAnythingIsAllocated) {
  const std::string dir = tmp_dir("memlimit");
  const TrainConfig cfg = seq2seq_config(dir);
  TrainOptions o;
  o.out_dir = dir + "/refused";
  o.quiet = true;
  o.max_memory_bytes = 1 << 20;  // the plan above is ~13 MiB
  const std::string msg = expect_error([&] { run_training(cfg, o); });
  for (const char* part : {"[--max-memory] training s2s.json needs weights", "gradients", "optimizer state", "activations",
                           "16 x 48 tokens", "more than the limit of 1048576 bytes", "training.batch_size"})
    EXPECT_NE(msg.find(part), std::string::npos) << part << " not in: " << msg;
  EXPECT_FALSE(std::filesystem::exists(o.out_dir));  // refused before the run directory exists
  std::filesystem::remove_all(dir);
}

TEST(MemoryLimit, ByteSizes) {
  EXPECT_EQ(parse_byte_size("1000", "x"), 1000);
  EXPECT_EQ(parse_byte_size("512M", "x"), 512ll << 20);
  EXPECT_EQ(parse_byte_size("1.5GiB", "x"), 3ll << 29);
  EXPECT_EQ(parse_byte_size("2g", "x"), 2ll << 30);
  for (const char* bad : {"", "G", "-1", "0", "12Q", "1e30"}) EXPECT_THROW(parse_byte_size(bad, "x"), Error) << bad;
}
