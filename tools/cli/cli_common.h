// Helpers shared by the commands that run a model directory.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "tfm/kv_cache.h"
#include "tfm/load.h"
#include "tfm/model_dir.h"
#include "tfm/session.h"
#include "tfm/tokenizer.h"

namespace tfm::cli {

// --adapter DIR: an adapter (LoRA, bottleneck, prefix tuning) (PEFT layout, tfm/adapter.h) on top of -m's model.
void add_adapter_option(CLI::App* cmd, std::string& adapter);
// --dtype TYPE [--recipe R]: the weight matrices converted at load (docs/quantization.md).
struct WeightOptions {
  std::string dtype, recipe;
};
void add_weight_options(CLI::App* cmd, WeightOptions& w);
// Converts the model's weights as asked (nothing when dtype is empty); fallbacks on stderr.
void apply_weight_options(Model& model, const WeightOptions& w);
// quantize_model's fallback notes on stderr: the first three and a count of the rest.
void print_fallbacks(const std::vector<std::string>& notes);
// The model (directory, hub directory or .gguf) through the library's load path (tfm/load.h):
// the adapter attached when `adapter` is not empty, its weights converted per `weights`
// (fallbacks on stderr), q4_0 repacked for decoding. A --max-memory spec (parsed here) refuses
// to go on, before any weight is read, when the plan for ctx positions (0: the model's) x
// batch sequences exceeds it (the error names the planner's breakdown, as tfm info -m prints it).
// With model parallelism (below): this rank's tensor-parallel shard, its partial sums added
// over the ranks by MPI, or its pipeline stage, handing activations on by MPI; --max-memory
// then applies to the shard or stage.
struct ModelParallel {
  std::int64_t tensor = 1, pipeline = 1;  // --tensor-parallel N, --pipeline-parallel N
  std::int64_t ranks() const { return tensor * pipeline; }
};
LoadedModel load_model(const std::string& path, const std::string& adapter, const WeightOptions& weights = {},
                       const std::string& max_memory = "", std::int64_t ctx = 0, std::int64_t batch = 1,
                       const ModelParallel& parallel = {});

// The load options' tp_* / pp_* fields for this rank of a model-parallel job (dist:: sums and sends).
void set_model_parallel(LoadOptions& o, const ModelParallel& parallel);

// --tensor-parallel N and --pipeline-parallel N on an inference command (mpirun -np N tfm ...).
void add_model_parallel_options(CLI::App* cmd, ModelParallel& p);
// Runs `body` (a command) as one rank of a model-parallel job, or plainly without one: checks
// that mpirun started as many processes as asked (one kind of parallelism at a time), sends the
// output of every rank but rank 0 to /dev/null (they compute the same tokens), stops every rank
// when one fails (never a hang), and ends the MPI session after.
void run_model_parallel(const ModelParallel& p, const std::function<void()>& body);
// Rank 0's value on every rank of a model-parallel job (a seed drawn from the clock).
std::uint64_t same_on_every_rank(std::uint64_t v, const ModelParallel& p);
// read_input_lines on rank 0, its lines sent to the others (mpirun gives stdin to rank 0 only).
std::vector<std::string> read_input_lines(const std::string& path, const ModelParallel& p);

// Lines of a file ("-": stdin), each checked for valid UTF-8 (errors name file:line). A
// trailing '\r' is dropped.
std::vector<std::string> read_input_lines(const std::string& path);
// One line on stderr before work starts: the model, the context and the KV cache's memory;
// with verbose, the parameter and weight figures too.
void report_model(const std::string& dir, const LoadedModel& lm, const KVCache& cache, bool verbose);
// --max-memory BYTES on an inference command (stored as given; load_model parses it).
void add_max_memory_option(CLI::App* cmd, std::string& spec);
// Prefill and decode tokens/s on stderr.
void report_timings(const Timings& t);
// Runs fn (one forward pass over texts) and adds its time and the texts' token count to t's
// prefill figures.
template <class Fn>
auto timed_prefill(const Tokenizer& tok, const std::vector<std::string>& texts, Timings& t, Fn&& fn) {
  const auto t0 = std::chrono::steady_clock::now();
  auto out = fn();
  t.prefill_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const auto& s : texts) t.prefill_tokens += static_cast<std::int64_t>(tok.encode(s).size());
  return out;
}

}  // namespace tfm::cli
