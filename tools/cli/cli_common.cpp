#include "cli_common.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>

#include "dist/comm.h"
#include "train/tensor_parallel_train.h"
#include "tfm/adapter.h"
#include "tfm/error.h"
#include "tfm/load.h"
#include "tfm/memory_plan.h"
#include "tfm/model_config.h"
#include "tfm/quantize.h"
#include "tfm/tokenizer.h"

namespace tfm::cli {

void add_adapter_option(CLI::App* cmd, std::string& adapter) {
  cmd->add_option("--adapter", adapter, "An adapter directory: LoRA, bottleneck or prefix tuning (adapter_config.json, adapter_model.safetensors)");
}

void add_weight_options(CLI::App* cmd, WeightOptions& w) {
  cmd->add_option("--dtype", w.dtype, "Weight type at load: f32, bf16, f16, q8_0, q4_0, q4_k, q6_k");
  cmd->add_option("--recipe", w.recipe, "With --dtype: q4_k_m (llama.cpp's mixed rule: q6_k for the output head, some V/down)");
}

void apply_weight_options(Model& model, const WeightOptions& w) {
  TFM_CHECK(w.recipe.empty() || !w.dtype.empty(), "--recipe", "needs --dtype");
  if (w.dtype.empty()) return;
  QuantizeOptions q;
  q.type = parse_weight_type(w.dtype, "--dtype");
  q.recipe = w.recipe;
  print_fallbacks(quantize_model(model, q));
}

void print_fallbacks(const std::vector<std::string>& notes) {
  const std::size_t shown = std::min<std::size_t>(notes.size(), 3);
  for (std::size_t i = 0; i < shown; ++i) std::fprintf(stderr, "tfm: %s\n", notes[i].c_str());
  if (notes.size() > shown) std::fprintf(stderr, "tfm: ... and %zu more matrices fell back the same way\n", notes.size() - shown);
}

LoadedModel load_model(const std::string& path, const std::string& adapter, const WeightOptions& weights,
                       const std::string& max_memory, std::int64_t ctx, std::int64_t batch, const ModelParallel& parallel) {
  TFM_CHECK(weights.recipe.empty() || !weights.dtype.empty(), "--recipe", "needs --dtype");
  if (!weights.dtype.empty()) parse_weight_type(weights.dtype, "--dtype");  // the flag's name in the error
  LoadOptions o;
  o.adapter = adapter;
  o.dtype = weights.dtype;
  o.recipe = weights.recipe;
  if (!max_memory.empty()) o.max_memory = parse_byte_size(max_memory, "--max-memory");
  o.ctx = ctx;
  o.batch = batch;
  set_model_parallel(o, parallel);
  std::vector<std::string> notes;
  LoadedModel lm = tfm::load_model(path, o, &notes);
  print_fallbacks(notes);
  return lm;
}

void set_model_parallel(LoadOptions& o, const ModelParallel& parallel) {
  // rank = stage * T + shard: a stage's shards (which sum every sub-layer) are consecutive;
  // shard k of each stage hands activations to shard k of the next.
  const auto t = static_cast<int>(parallel.tensor), p = static_cast<int>(parallel.pipeline);
  const int r = dist::rank();
  const bool both = t > 1 && p > 1;
  if (t > 1) {
    o.tp_ranks = t;
    o.tp_rank = r % t;
    o.tp_sum = train_detail::partial_sum_over(both ? dist::split(r / t, r % t) : dist::world());
  }
  if (p > 1) {
    o.pp_stages = p;
    o.pp_stage = r / t;
    o.pp_comm = train_detail::pipe_comm_over(both ? dist::split(r % t, r / t) : dist::world());
  }
}

void add_model_parallel_options(CLI::App* cmd, ModelParallel& p) {
  cmd->add_option("--tensor-parallel", p.tensor,
                  "Split each layer's heads and FFN over N processes (mpirun -np N; docs/distributed.md)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--pipeline-parallel", p.pipeline,
                  "Split the layers into N stages, one per process (mpirun -np N; docs/distributed.md)")
      ->check(CLI::Range(1, 1024));
}

void run_model_parallel(const ModelParallel& p, const std::function<void()>& body) {
  if (p.ranks() == 1) {
    body();
    return;
  }
  const std::int64_t ranks = p.ranks();
  const std::string flag = p.tensor > 1 && p.pipeline > 1 ? "--tensor-parallel " + std::to_string(p.tensor) +
                                                                " x --pipeline-parallel " + std::to_string(p.pipeline)
                           : p.tensor > 1 ? "--tensor-parallel " + std::to_string(ranks)
                                          : "--pipeline-parallel " + std::to_string(ranks);
  TFM_CHECK(dist::launched() && dist::size() == ranks, flag, "needs ", ranks,
            " processes started together: mpirun -np ", ranks, " tfm ... (this is ", dist::size(),
            dist::launched() ? " of an MPI job)" : ", started without mpirun)");
  // Every rank computes the same tokens; rank 0 speaks for them.
  if (dist::rank() != 0) TFM_CHECK(std::freopen("/dev/null", "w", stdout) != nullptr, flag, "cannot silence rank ",
                                   dist::rank(), "'s output");
  try {
    body();
  } catch (const std::exception& e) {
    dist::abort_job(e.what(), 1);  // never returns: the other ranks would wait for this one forever
  }
  std::fflush(stdout);
  dist::finalize();
}

std::uint64_t same_on_every_rank(std::uint64_t v, const ModelParallel& p) {
  if (p.ranks() > 1) dist::broadcast(&v, sizeof v, 0);
  return v;
}

std::vector<std::string> read_input_lines(const std::string& path, const ModelParallel& p) {
  if (p.ranks() == 1) return read_input_lines(path);
  std::vector<std::string> lines;
  if (dist::rank() == 0) lines = read_input_lines(path);
  std::string joined;  // each line with its length before it
  for (const auto& l : lines) joined += std::to_string(l.size()) + ":" + l;
  std::uint64_t n = same_on_every_rank(static_cast<std::uint64_t>(joined.size()), p);
  joined.resize(n);
  dist::broadcast(joined.data(), n, 0);
  lines.clear();
  for (std::size_t at = 0; at < joined.size();) {
    const std::size_t colon = joined.find(':', at), len = std::stoull(joined.substr(at, colon - at));
    lines.push_back(joined.substr(colon + 1, len));
    at = colon + 1 + len;
  }
  return lines;
}

std::vector<std::string> read_input_lines(const std::string& path) {
  std::ifstream file;
  if (path != "-") {
    file.open(path);
    TFM_CHECK(file.good(), path, "cannot open the file");
  }
  std::istream& in = path == "-" ? std::cin : file;
  std::vector<std::string> lines;
  std::string line;
  for (std::size_t n = 1; std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    check_utf8(line, (path == "-" ? std::string("stdin") : path) + ":" + std::to_string(n));
    lines.push_back(line);
  }
  return lines;
}

void add_max_memory_option(CLI::App* cmd, std::string& spec) {
  cmd->add_option("--max-memory", spec,
                  "Refuse to start when the memory plan (tfm info -m) exceeds BYTES (e.g. 2G; K/M/G = 1024^n)");
}

void report_model(const std::string& dir, const LoadedModel& lm, const KVCache& cache, bool verbose) {
  const double mib = 1.0 / (1024.0 * 1024.0);
  const int tp = lm.model.tensor_parallel_ranks(), pp = lm.model.pipeline_stages();
  const std::string stage = pp > 1 ? " stage " + std::to_string(lm.model.pipeline_stage()) + " of " + std::to_string(pp) : "";
  const std::string shard =
      tp > 1 ? " in rank " + std::to_string(lm.model.tensor_parallel_rank()) + "'s shard of " + std::to_string(tp) +
                   (pp > 1 ? " of" + stage : "")
      : pp > 1 ? " in" + stage
               : "";
  std::fprintf(stderr, "tfm: %s: %s, %.2fM parameters%s; context %lld x %lld sequence(s), KV cache %.1f MiB\n", dir.c_str(),
               to_string(lm.config.architecture), static_cast<double>(lm.model.parameter_count()) / 1e6, shard.c_str(),
               static_cast<long long>(cache.capacity()), static_cast<long long>(cache.slots()),
               static_cast<double>(cache.bytes()) * mib);
  if (verbose) {
    double bytes = 0;  // as held: compact matrices at their size (tied copies once)
    for (const auto& [name, t] : lm.model.parameters()) bytes += static_cast<double>(t.nbytes());
    std::fprintf(stderr, "tfm: weights %.1f MiB (%s), %lld decoder layers, vocabulary %lld\n", bytes * mib,
                 lm.model.has_compact_weights() ? "as stored" : "f32", static_cast<long long>(cache.layers()),
                 static_cast<long long>(lm.config.vocab_size));
  }
}

void report_timings(const Timings& t) {
  auto rate = [](std::int64_t n, double s) { return s > 0 ? static_cast<double>(n) / s : 0.0; };
  std::fprintf(stderr, "tfm: prefill %lld tokens in %.3f s (%.1f tokens/s)", static_cast<long long>(t.prefill_tokens),
               t.prefill_seconds, rate(t.prefill_tokens, t.prefill_seconds));
  if (t.decode_tokens > 0)
    std::fprintf(stderr, "; decode %lld tokens in %.3f s (%.1f tokens/s)", static_cast<long long>(t.decode_tokens),
                 t.decode_seconds, rate(t.decode_tokens, t.decode_seconds));
  std::fputc('\n', stderr);
}

}  // namespace tfm::cli
