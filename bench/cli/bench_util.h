// Shared pieces of `tfm bench`: the options every section reads, best-of timing, the load
// line, and running a bench/peers/torch/bench_torch_*.py helper that prints one JSON object.
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>

namespace tfm::cli {

struct BenchOptions {
  std::string section = "all";
  std::int64_t bt = 1024;   // gemm: B*T rows of the activation matrix
  bool linear = false;      // gemm: B a layer's weight (N, K) times its transpose, from memory
  double min_time = 0.15;   // seconds spent per figure (at least min_reps runs)
  int min_reps = 3;
  bool torch = true;        // run the PyTorch helper scripts for the torch columns
  bool long_run = false;    // the long versions: larger shapes (kernels, attention), more steps
  std::int64_t plain_max_t = 1024;  // attention: the plain O(T^2) path is skipped above this T
  std::string model_dir;    // decode: a trained model directory (-m DIR); empty: skipped
  std::string dtype, recipe;  // decode: weight type of both models (--dtype, --recipe; quantize.h)
  bool model_only = false;    // decode: -m's model alone (no random GPT-2-size model)
};

inline double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Best (smallest) seconds of fn() over at least min_reps runs and min_time seconds, after
// one warm-up run.
template <class Fn>
double best_seconds(const BenchOptions& o, Fn&& fn) {
  fn();
  double best = 1e30, spent = 0;
  for (int reps = 0; reps < o.min_reps || spent < o.min_time; ++reps) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    const double dt = seconds_since(t0);
    best = std::min(best, dt);
    spent += dt;
  }
  return best;
}

// "load average: ... on N cores" (with a warning above 0.5) — figures under load are low.
void print_load();

// Runs `/usr/bin/python3 tools/reference/<script> <args>` (the source dir from
// $TFM_SOURCE_DIR or the build) and parses its stdout as JSON. Returns a null json and sets
// `why` when python/torch is missing or the script fails (its stderr is discarded).
nlohmann::json run_torch_script(const std::string& script, const std::string& args, std::string& why);

// "12.3 MiB" style.
std::string format_bytes(double bytes);

}  // namespace tfm::cli

namespace tfm::cli {

// The sections beyond machine/gemm, one cmd_bench_<section>.cpp each; `threads` is the
// engine's thread count (-t N), restored by the caller afterwards.
void run_bench_kernels(const BenchOptions& o, int threads);
void run_bench_qgemm(const BenchOptions& o, int threads);  // compact-weight products (qgemm)
void run_bench_attention(const BenchOptions& o, int threads);
// tfm bench attention --sparse: sparse (window + globals + random blocks) vs dense, T = 1k..16k.
struct SparseBenchOptions {
  bool on = false;
  std::int64_t window = 64, global_first = 1, random_blocks = 2, block_size = 64;
  std::int64_t dense_max_t = 16384;        // dense fused rows above this T are skipped
  std::int64_t sparse_plain_max_t = 16384;  // sparse plain rows above this T are skipped
};
void run_bench_sparse_attention(const BenchOptions& o, const SparseBenchOptions& s, int threads);
void run_bench_train_step(const BenchOptions& o, int threads);
void run_bench_decode(const BenchOptions& o, int threads);
void run_bench_vision(const BenchOptions& o, int threads);  // ViT-B/16 images/s vs torchvision
void run_bench_embed(const BenchOptions& o, int threads);   // sentence embeddings/s vs PyTorch
void run_bench_index(const BenchOptions& o, int threads);   // FAISS via VectorIndex vs FAISS's Python
void run_bench_grammar(const std::string& tokenizer_dir, int threads);  // constrained decoding's cost
// tfm bench train-config CONFIG: a real training run of the config, ours beside PyTorch,
// `rounds` times alternating (best round of each side reported).
void run_bench_train_config(const std::string& config, std::int64_t steps, std::int64_t warmup, bool torch,
                            int threads, int rounds, bool bf16 = false);

}  // namespace tfm::cli

#include "tfm/model_config.h"

namespace tfm::cli {

// Parameter count of a config, and the model as bench_torch_*.py builds it (sizes, switches).
std::int64_t param_count(const ModelConfig& c);
nlohmann::json config_json(const std::string& name, const ModelConfig& c);

}  // namespace tfm::cli
