// tfm bench — the machine's yardsticks and our GEMM beside the BLAS and PyTorch, in one run.
//
//   tfm bench [all|machine|gemm|kernels|attention|train-step|decode] [--bt 1024] [--linear] [--min-time 0.15]
//             [--no-torch] [--long] [--plain-max-t 2048] [-m DIR]
//   tfm -t 2 bench gemm
//
// machine: FMA peak (a long independent-FMA loop) and read bandwidth (summing a 256 MiB
//          array), on 1 thread and on all threads.
// gemm:    GFLOP/s at Transformer shapes [B*T, C] x [C, 4C] and [B*T, C] x [C, C] for
//          C = 128..1024: ours (tfm's split over single-threaded BLAS calls), the BLAS called
//          directly with its own threading, and PyTorch (bench/peers/torch/bench_torch_gemm.py
//          through /usr/bin/python3, skipped with a note when torch is missing), each at 1 and
//          at the engine's thread count. Every figure is the best of several repetitions.
// vision:  ViT-B/16 images/s beside torchvision's vit_b_16 (not part of "all": minutes).
// embed, index: sentence embeddings/s beside PyTorch; FAISS through tfm beside FAISS's Python
//          (cmd_bench_retrieval.cpp; not part of "all").
// kernels, attention, train-step, decode, vision: cmd_bench_<section>.cpp (each beside its PyTorch twin,
//          bench/peers/torch/bench_torch_<section>.py).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "bench_probe.h"
#include "bench_util.h"
#include "commands.h"
#include "kernels/gemm.h"
#include "tfm/error.h"
#include "tfm/runtime.h"
#include "tfm/tensor.h"

namespace tfm::cli {
namespace {

struct GemmShape {
  std::int64_t M, N, K;
  std::string label;
};

constexpr int kGemmRounds = 3;  // interleaved measurement rounds per GEMM shape

// Best GFLOP/s of fn() (see best_seconds).
template <class Fn>
double best_gflops(double flops, const BenchOptions& o, Fn&& fn) {
  return flops / best_seconds(o, fn) * 1e-9;
}

void run_machine(const BenchOptions& o, int threads) {
  std::printf("\n== machine (FMA: %s)\n", fma_isa_name());
  std::printf("%-28s %12s", "", "1 thread");
  if (threads > 1) std::printf(" %12s", (std::to_string(threads) + " threads").c_str());
  std::printf("\n%-28s %12.1f", "peak FMA GFLOP/s", peak_gflops(1, o.min_reps));
  if (threads > 1) std::printf(" %12.1f", peak_gflops(threads, o.min_reps));
  const std::int64_t bytes = std::int64_t{256} << 20;
  std::printf("\n%-28s %12.1f", "read bandwidth GB/s (256MiB)", read_bandwidth_gbs(bytes, 1, o.min_reps));
  if (threads > 1) std::printf(" %12.1f", read_bandwidth_gbs(bytes, threads, o.min_reps));
  std::printf("\n");
}

// PyTorch figures keyed by (M, N, K, threads); empty with `note` set when unavailable.
std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, int>, double> torch_figures(
    const std::vector<GemmShape>& shapes, const std::vector<int>& thread_counts, const BenchOptions& o,
    std::string& note) {
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, int>, double> out;
  if (!o.torch) {
    note = "PyTorch column skipped (--no-torch)";
    return out;
  }
  std::string spec, tc;
  for (const auto& s : shapes)
    spec += std::to_string(s.M) + "," + std::to_string(s.N) + "," + std::to_string(s.K) + ";";
  for (int t : thread_counts) tc += (tc.empty() ? "" : ",") + std::to_string(t);
  std::string why;
  const auto j = run_torch_script("bench_torch_gemm.py", "--shapes '" + spec + "' --threads " + tc + " --min-time " +
                                  std::to_string(o.min_time) + " --min-reps " + std::to_string(o.min_reps) +
                                  (o.linear ? " --linear" : ""), why);
  try {
    for (const auto& r : j.at("results"))
      out[{r.at("M").get<std::int64_t>(), r.at("N").get<std::int64_t>(), r.at("K").get<std::int64_t>(),
           r.at("threads").get<int>()}] = r.at("gflops").get<double>();
    note = "PyTorch " + j.at("torch").get<std::string>() + " (torch.mm, /usr/bin/python3)";
  } catch (const std::exception&) {
    out.clear();
    note = "PyTorch column skipped: " + (why.empty() ? std::string("unexpected JSON") : why);
  }
  return out;
}

void run_gemm(const BenchOptions& o, int threads) {
  std::vector<int> tcs = {1};
  if (threads > 1) tcs.push_back(threads);
  std::vector<GemmShape> shapes;
  for (std::int64_t C : {128, 256, 512, 768, 1024}) {
    shapes.push_back({o.bt, 4 * C, C, "[BT,C]x[C,4C] C=" + std::to_string(C)});
    shapes.push_back({o.bt, C, C, "[BT,C]x[C,C]  C=" + std::to_string(C)});
  }
  std::string torch_note;
  const auto torch = torch_figures(shapes, tcs, o, torch_note);

  std::printf("\n== gemm GFLOP/s, fp32, BT=%lld rows (best of %d interleaved rounds of >= %d runs, >= %.2fs each)\n",
              static_cast<long long>(o.bt), kGemmRounds, o.min_reps, o.min_time);
  if (o.linear)
    std::printf("--linear: B a layer's weight stored (N, K) and multiplied transposed (nn.Linear), each run on the next\n"
                "of copies filling >= 256 MiB, so that the weight comes from memory as in a model's forward pass\n");
  std::printf("ours = tfm::kernels::gemm (%s)\nblas = the same library called directly with its own threading\n",
              kernels::gemm_backend_name());
  std::printf("%s\n\n", torch_note.c_str());
  std::printf("%-26s %-16s", "shape", "M x N x K");
  for (const char* who : {"ours", "blas", "torch"})
    for (int t : tcs) std::printf(" %8s", (std::string(who) + "@" + std::to_string(t) + "t").c_str());
  if (threads > 1) std::printf(" %13s", ("ours@" + std::to_string(threads) + "t/blas@1t").c_str());
  std::printf("\n");

  double sum_ratio = 0;
  for (const auto& s : shapes) {
    const Tensor a = Tensor::uniform({s.M, s.K}, 1, -0.5f, 0.5f);
    // --linear: copies of the weight, each run on the next (B[next()]); else one B (K, N).
    const std::size_t copies = o.linear ? std::max<std::size_t>(2, (std::size_t{256} << 20) / static_cast<std::size_t>(4 * s.N * s.K) + 1) : 1;
    std::vector<Tensor> bs;
    for (std::size_t i = 0; i < copies; ++i)
      bs.push_back(o.linear ? Tensor::uniform({s.N, s.K}, 2 + i, -0.5f, 0.5f) : Tensor::uniform({s.K, s.N}, 2, -0.5f, 0.5f));
    std::size_t turn = 0;
    const auto next = [&] { return bs[turn++ % copies].data<float>(); };
    const bool tb = o.linear;
    const std::int64_t ldb = tb ? s.K : s.N;
    Tensor c = Tensor::zeros({s.M, s.N});
    const float* A = a.data<float>();
    float* Cp = c.data<float>();
    const double flops = 2.0 * static_cast<double>(s.M) * s.N * s.K;
    // The columns are measured in interleaved rounds (ours@1t, ours@Nt, blas@1t, blas@Nt,
    // then again), each keeping its best: a few seconds of contention from outside (this is
    // a shared virtual machine) then cannot sink one column while sparing the next.
    std::vector<double> ours(tcs.size(), 0.0), blas(tcs.size(), 0.0);
    for (int round = 0; round < kGemmRounds; ++round) {
      for (std::size_t i = 0; i < tcs.size(); ++i) {
        set_num_threads(tcs[i]);
        ours[i] = std::max(ours[i], best_gflops(flops, o, [&] {
          kernels::gemm(false, tb, s.M, s.N, s.K, 1.0f, A, s.K, next(), ldb, 0.0f, Cp, s.N);
        }));
      }
      set_num_threads(threads);
      for (std::size_t i = 0; i < tcs.size(); ++i)
        blas[i] = std::max(blas[i], best_gflops(flops, o, [&] {
          kernels::gemm_blas_direct(false, tb, s.M, s.N, s.K, 1.0f, A, s.K, next(), ldb, 0.0f, Cp, s.N, tcs[i]);
        }));
    }
    char dims[40];
    std::snprintf(dims, sizeof dims, "%lldx%lldx%lld", static_cast<long long>(s.M), static_cast<long long>(s.N),
                  static_cast<long long>(s.K));
    std::printf("%-26s %-16s", s.label.c_str(), dims);
    for (double g : ours) std::printf(" %8.1f", g);
    for (double g : blas) std::printf(" %8.1f", g);
    for (int t : tcs) {
      const auto it = torch.find({s.M, s.N, s.K, t});
      if (it == torch.end()) std::printf(" %8s", "-");
      else std::printf(" %8.1f", it->second);
    }
    if (threads > 1) {
      const double ratio = ours.back() / blas.front();
      sum_ratio += ratio;
      std::printf(" %13.2f", ratio);
    }
    std::printf("\n");
    std::fflush(stdout);
  }
  if (threads > 1)
    std::printf("\nmean ours@%dt / blas@1t over the %zu shapes: %.2f\n", threads, shapes.size(),
                sum_ratio / static_cast<double>(shapes.size()));
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto opts = std::make_shared<BenchOptions>();
  auto* cmd = app.add_subcommand("bench", "Measure the machine, GEMM, kernels, attention, training and decoding vs BLAS/PyTorch");
  cmd->add_option("section", opts->section,
                  "What to measure: all | machine | gemm | kernels | attention | train-step | decode | train-config CONFIG | qgemm | vision | grammar | embed | index")
      ->check(CLI::IsMember({"all", "machine", "gemm", "kernels", "attention", "train-step", "decode", "train-config", "qgemm",
                             "vision", "grammar", "embed", "index"}));
  cmd->add_option("-m,--model", opts->model_dir, "decode: a trained decoder-only model directory (or .gguf) to measure too");
  cmd->add_option("--dtype", opts->dtype, "decode: weight type f32, bf16, f16, q8_0, q4_0, q4_k, q6_k (converted at load)");
  cmd->add_option("--recipe", opts->recipe, "decode: with --dtype, q4_k_m (llama.cpp's mix)");
  auto grammar_tokenizer = std::make_shared<std::string>("data/gpt2-tokenizer");
  cmd->add_option("--tokenizer", *grammar_tokenizer, "grammar: the vocabulary to constrain (default data/gpt2-tokenizer)");
  cmd->add_flag("--model-only", opts->model_only, "decode: measure -m's model only (skip the random GPT-2-size one)");
  auto train_config = std::make_shared<std::string>();
  auto train_steps = std::make_shared<std::int64_t>(50);
  auto train_warmup = std::make_shared<std::int64_t>(10);
  auto train_rounds = std::make_shared<int>(1);
  auto train_precision = std::make_shared<std::string>("fp32");
  cmd->add_option("config", *train_config, "train-config: the training config JSON")->check(CLI::ExistingFile);
  cmd->add_option("--steps", *train_steps, "train-config: timed training steps")->check(CLI::PositiveNumber);
  cmd->add_option("--warmup", *train_warmup, "train-config: untimed steps first")->check(CLI::NonNegativeNumber);
  cmd->add_option("--rounds", *train_rounds, "train-config: rounds alternating tfm and PyTorch; best of each reported")
      ->check(CLI::Range(1, 20));
  cmd->add_option("--precision", *train_precision, "train-config: fp32, or bf16 (ours bf16 mixed precision, torch autocast)")
      ->check(CLI::IsMember({"fp32", "bf16"}));
  cmd->add_option("--bt", opts->bt, "Rows B*T of the activation matrix in the GEMM shapes")->check(CLI::Range(1, 1 << 16));
  cmd->add_flag("--linear", opts->linear, "gemm: B a layer's weight (N, K) multiplied transposed, from memory (copies >= 256 MiB)");
  cmd->add_option("--min-time", opts->min_time, "Seconds spent per figure (best run is reported)")
      ->check(CLI::Range(0.0, 10.0));
  cmd->add_option("--min-reps", opts->min_reps, "Minimum runs per figure")->check(CLI::Range(1, 1000));
  cmd->add_flag("!--no-torch", opts->torch, "Skip the PyTorch column");
  cmd->add_flag("--long", opts->long_run, "Long versions: larger kernel shapes, attention up to T=8192, train-step best of --min-reps steps");
  cmd->add_option("--plain-max-t", opts->plain_max_t, "attention: skip the plain (O(T^2) memory) path above this T")
      ->check(CLI::Range(0, 1 << 20));
  auto sparse = std::make_shared<SparseBenchOptions>();
  cmd->add_flag("--sparse", sparse->on, "attention: sparse (window + global + random blocks) vs dense, T=1k..16k");
  cmd->add_option("--sparse-window", sparse->window, "attention --sparse: window width")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--sparse-global", sparse->global_first, "attention --sparse: the first N tokens are global")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--sparse-random", sparse->random_blocks, "attention --sparse: random key blocks per query block")
      ->check(CLI::Range(0, 1 << 10));
  cmd->add_option("--sparse-block", sparse->block_size, "attention --sparse: random block size")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--dense-max-t", sparse->dense_max_t, "attention --sparse: skip dense fused rows above this T")
      ->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--sparse-plain-max-t", sparse->sparse_plain_max_t, "attention --sparse: skip sparse plain rows above this T")
      ->check(CLI::Range(0, 1 << 20));
  cmd->callback([opts, train_config, train_steps, train_warmup, train_rounds, train_precision, sparse, grammar_tokenizer] {
    const int threads = num_threads();
    std::printf("tfm %s bench — %s, %d threads (set with -t N)\n", version_string(), cpu_info().brand.c_str(), threads);
    print_load();
    if (opts->section == "all" || opts->section == "machine") run_machine(*opts, threads);
    if (opts->section == "all" || opts->section == "gemm") run_gemm(*opts, threads);
    set_num_threads(threads);
    if (opts->section == "all" || opts->section == "kernels") run_bench_kernels(*opts, threads);
    set_num_threads(threads);
    if (opts->section == "qgemm") run_bench_qgemm(*opts, threads);
    set_num_threads(threads);
    if (opts->section == "attention" && sparse->on) run_bench_sparse_attention(*opts, *sparse, threads);
    else if (opts->section == "all" || opts->section == "attention") run_bench_attention(*opts, threads);
    set_num_threads(threads);
    if (opts->section == "all" || opts->section == "train-step") run_bench_train_step(*opts, threads);
    set_num_threads(threads);
    if (opts->section == "train-config") {
      if (train_config->empty()) throw CLI::ValidationError("config", "bench train-config needs a config JSON");
      run_bench_train_config(*train_config, *train_steps, *train_warmup, opts->torch, threads, *train_rounds,
                             *train_precision == "bf16");
    }
    if (opts->section == "all" || opts->section == "decode") run_bench_decode(*opts, threads);
    set_num_threads(threads);
    if (opts->section == "vision") run_bench_vision(*opts, threads);  // minutes on 2 cores: not in "all"
    set_num_threads(threads);
    if (opts->section == "grammar") run_bench_grammar(*grammar_tokenizer, threads);
    set_num_threads(threads);
    if (opts->section == "embed") run_bench_embed(*opts, threads);
    set_num_threads(threads);
    if (opts->section == "index") run_bench_index(*opts, threads);
    set_num_threads(threads);
  });
}

}  // namespace tfm::cli
