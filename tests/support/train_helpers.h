// Helpers of the training tests (tests/unit/train/test_train*.cpp).
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>
#include <unistd.h>

#include "tfm/error.h"
#include "tfm/safetensors.h"
#include "tfm/train.h"

namespace tfm::train_test {

inline std::string tmp_dir(const std::string& name) {
  const std::filesystem::path p = std::filesystem::temp_directory_path() / ("tfm_train_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p.string();
}

inline std::string expect_error(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected tfm::Error";
  return "";
}

// A tiny char-level LM config on the first 40k characters of tiny Shakespeare.
inline TrainConfig tiny_lm(const std::string& dir) {
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

// The resume test's other half: the same config trained into `part_dir`, stopped after
// `stop_after` steps, then resumed there to the end. Returns the resumed run (whose losses
// are appended to the first run's in `losses`), for comparison with an uninterrupted run.
struct InterruptedRun {
  TrainResult rest;
  std::vector<double> losses;  // the first run's, then the resumed run's
};
inline InterruptedRun train_interrupted(const TrainConfig& cfg, TrainOptions o, const std::string& part_dir,
                                        std::int64_t stop_after) {
  o.out_dir = part_dir;
  o.resume_dir.clear();
  o.on_step = [stop_after](std::int64_t step, double) { return step < stop_after; };
  InterruptedRun r;
  r.losses = run_training(cfg, o).losses;
  o.on_step = nullptr;
  o.resume_dir = part_dir;
  r.rest = run_training(cfg, o);
  r.losses.insert(r.losses.end(), r.rest.losses.begin(), r.rest.losses.end());
  return r;
}

}  // namespace tfm::train_test
