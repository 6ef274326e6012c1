// tfm bench — the machine's yardsticks and our GEMM beside the BLAS and PyTorch, in one run.
//
//   tfm bench [all|machine|gemm] [--bt 1024] [--min-time 0.15] [--no-torch]
//   tfm -t 2 bench gemm
//
// machine: FMA peak (a long independent-FMA loop) and read bandwidth (summing a 256 MiB
//          array), on 1 thread and on all threads.
// gemm:    GFLOP/s at Transformer shapes [B*T, C] x [C, 4C] and [B*T, C] x [C, C] for
//          C = 128..1024: ours (tfm's split over single-threaded BLAS calls), the BLAS called
//          directly with its own threading, and PyTorch (tools/reference/bench_torch_gemm.py
//          through /usr/bin/python3, skipped with a note when torch is missing), each at 1 and
//          at the engine's thread count. Every figure is the best of several repetitions.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "bench_probe.h"
#include "commands.h"
#include "kernels/gemm.h"
#include "tfm/error.h"
#include "tfm/runtime.h"
#include "tfm/tensor.h"

#ifndef TFM_SOURCE_DIR
#define TFM_SOURCE_DIR "."
#endif

namespace tfm::cli {
namespace {

struct BenchOptions {
  std::string section = "all";
  std::int64_t bt = 1024;   // B*T rows of the activation matrix
  double min_time = 0.15;   // seconds spent per figure (at least min_reps runs)
  int min_reps = 3;
  bool torch = true;
};

struct GemmShape {
  std::int64_t M, N, K;
  std::string label;
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Best GFLOP/s of fn() over at least min_reps runs and min_time seconds (after a warm-up).
template <class Fn>
double best_gflops(double flops, const BenchOptions& o, Fn&& fn) {
  fn();
  double best = 1e30, spent = 0;
  for (int reps = 0; reps < o.min_reps || spent < o.min_time; ++reps) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    const double dt = seconds_since(t0);
    best = std::min(best, dt);
    spent += dt;
  }
  return flops / best * 1e-9;
}

void print_load() {
  if (FILE* f = std::fopen("/proc/loadavg", "r")) {
    double l1 = 0, l5 = 0;
    if (std::fscanf(f, "%lf %lf", &l1, &l5) == 2)
      std::printf("load average: %.2f (1 min), %.2f (5 min) on %d cores%s\n", l1, l5, cpu_info().logical_cores,
                  l1 > 0.5 ? "  -- machine busy: figures may be low" : "");
    std::fclose(f);
  }
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
  const char* env_dir = std::getenv("TFM_SOURCE_DIR");
  const std::string script = std::string(env_dir ? env_dir : TFM_SOURCE_DIR) + "/tools/reference/bench_torch_gemm.py";
  std::string spec, tc;
  for (const auto& s : shapes)
    spec += std::to_string(s.M) + "," + std::to_string(s.N) + "," + std::to_string(s.K) + ";";
  for (int t : thread_counts) tc += (tc.empty() ? "" : ",") + std::to_string(t);
  const std::string cmd = "/usr/bin/python3 '" + script + "' --shapes '" + spec + "' --threads " + tc +
                          " --min-time " + std::to_string(o.min_time) + " --min-reps " +
                          std::to_string(o.min_reps) + " 2>/dev/null";
  std::string text;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    std::array<char, 4096> buf;
    std::size_t n;
    while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) text.append(buf.data(), n);
    if (pclose(p) != 0) text.clear();
  }
  try {
    const auto j = nlohmann::json::parse(text);
    for (const auto& r : j.at("results"))
      out[{r.at("M").get<std::int64_t>(), r.at("N").get<std::int64_t>(), r.at("K").get<std::int64_t>(),
           r.at("threads").get<int>()}] = r.at("gflops").get<double>();
    note = "PyTorch " + j.at("torch").get<std::string>() + " (torch.mm, /usr/bin/python3)";
  } catch (const std::exception&) {
    out.clear();
    note = "PyTorch column skipped: /usr/bin/python3 with torch not available (" + script + ")";
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

  std::printf("\n== gemm GFLOP/s, fp32, BT=%lld rows (best of >= %d runs, >= %.2fs each)\n",
              static_cast<long long>(o.bt), o.min_reps, o.min_time);
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
    const Tensor a = Tensor::uniform({s.M, s.K}, 1, -0.5f, 0.5f), b = Tensor::uniform({s.K, s.N}, 2, -0.5f, 0.5f);
    Tensor c = Tensor::zeros({s.M, s.N});
    const float *A = a.data<float>(), *B = b.data<float>();
    float* Cp = c.data<float>();
    const double flops = 2.0 * static_cast<double>(s.M) * s.N * s.K;
    std::vector<double> ours, blas;
    for (int t : tcs) {
      set_num_threads(t);
      ours.push_back(best_gflops(flops, o, [&] { kernels::gemm(false, false, s.M, s.N, s.K, 1.0f, A, s.K, B, s.N, 0.0f, Cp, s.N); }));
    }
    set_num_threads(threads);
    for (int t : tcs)
      blas.push_back(best_gflops(flops, o, [&] {
        kernels::gemm_blas_direct(false, false, s.M, s.N, s.K, 1.0f, A, s.K, B, s.N, 0.0f, Cp, s.N, t);
      }));
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
  auto* cmd = app.add_subcommand("bench", "Measure the machine (FMA peak, bandwidth) and GEMM speed vs BLAS/PyTorch");
  cmd->add_option("section", opts->section, "What to measure: all | machine | gemm")
      ->check(CLI::IsMember({"all", "machine", "gemm"}));
  cmd->add_option("--bt", opts->bt, "Rows B*T of the activation matrix in the GEMM shapes")->check(CLI::Range(1, 1 << 16));
  cmd->add_option("--min-time", opts->min_time, "Seconds spent per figure (best run is reported)")
      ->check(CLI::Range(0.0, 10.0));
  cmd->add_option("--min-reps", opts->min_reps, "Minimum runs per figure")->check(CLI::Range(1, 1000));
  cmd->add_flag("!--no-torch", opts->torch, "Skip the PyTorch column");
  cmd->callback([opts] {
    const int threads = num_threads();
    std::printf("tfm %s bench — %s, %d threads (set with -t N)\n", version_string(), cpu_info().brand.c_str(), threads);
    print_load();
    if (opts->section == "all" || opts->section == "machine") run_machine(*opts, threads);
    if (opts->section == "all" || opts->section == "gemm") run_gemm(*opts, threads);
    set_num_threads(threads);
  });
}

}  // namespace tfm::cli
