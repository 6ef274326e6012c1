// tfm bench train-config CONFIG [--steps N] [--warmup W] [--rounds R] — training throughput and peak memory
// of a real training config (data, model, batch, AdamW, clipping, schedule), ours beside the
// same model and optimiser in PyTorch 1.13 (bench/peers/torch/bench_torch_train_config.py).
//
// Ours is run_training itself (the loop `tfm train` runs) for W + N steps, timed from the end
// of step W to the end of step W + N through the on_step hook, so set-up, tokenizer training,
// the final eval and checkpoint are outside the timing. Peak RSS is measured the same way for
// both: each side's own process reads its VmHWM (/proc/self/status) when its run is done (ours
// before the PyTorch child starts; a child's memory never counts in the parent's VmHWM).
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <unistd.h>

#include "bench_util.h"
#include "tfm/error.h"
#include "tfm/model_dir.h"
#include "tfm/runtime.h"
#include "tfm/train.h"

namespace tfm::cli {
namespace {

namespace fs = std::filesystem;

std::string fmt_ratio(double r) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2fx", r);
  return buf;
}

double vm_hwm_bytes() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) * 1024.0;
  return 0;
}

struct Side {
  double tokens_per_s = 0, seconds = 0, peak_rss = 0, first_loss = 0, last_loss = 0;
  std::int64_t params = 0;
  bool ok = false;
};

}  // namespace

void run_bench_train_config(const std::string& config, std::int64_t steps, std::int64_t warmup, bool torch,
                            int threads, int rounds, bool bf16) {
  TrainConfig cfg = load_train_config(config);
  if (bf16) cfg.precision = Precision::bf16;  // and torch.autocast(bfloat16) on the PyTorch side
  cfg.sample_tokens = 0;
  cfg.eval_batches = 1;  // the one eval at the end is outside the timing; keep it short
  const std::int64_t tokens_per_step = cfg.batch_size * cfg.grad_accum * cfg.block_size;
  set_num_threads(threads);
  ModelConfig mc;
  auto run_ours = [&] {
    const fs::path out = fs::temp_directory_path() / ("tfm-bench-train-" + std::to_string(::getpid()));
    TrainOptions opt;
    opt.out_dir = out.string();
    opt.max_steps = warmup + steps;
    opt.quiet = true;
    opt.print_sample = false;
    using clock = std::chrono::steady_clock;
    clock::time_point t_start, t_end;
    opt.on_step = [&](std::int64_t step, double) {
      if (step == warmup) t_start = clock::now();
      if (step == warmup + steps) t_end = clock::now();
      return true;
    };
    if (warmup == 0) t_start = clock::now();
    Side ours;
    TrainResult r;
    try {
      r = run_training(cfg, opt);
    } catch (...) {
      fs::remove_all(out);
      throw;
    }
    ours.seconds = std::chrono::duration<double>(t_end - t_start).count();
    ours.tokens_per_s = static_cast<double>(steps * tokens_per_step) / ours.seconds;
    ours.first_loss = r.losses.front();
    ours.last_loss = r.losses.back();
    mc = load_model_dir(out.string()).config;
    ours.params = param_count(mc);
    fs::remove_all(out);
    ours.ok = true;
    return ours;
  };

  std::string note;
  auto run_torch = [&] {
    Side pt;
    if (!torch) {
      note = "PyTorch column skipped (--no-torch)";
      return pt;
    }
    TFM_CHECK(cfg.task == TaskKind::lm && cfg.optimizer.kind == OptimizerKind::adamw &&
                  cfg.schedule.kind == ScheduleKind::cosine,
              "bench train-config", "the PyTorch side covers LM configs with AdamW and the cosine schedule");
    char args[1024];
    std::snprintf(args, sizeof args,
                  "--data '%s' --B %lld --T %lld --steps %lld --warmup %lld --threads %d --lr %.9g --beta1 %.9g "
                  "--beta2 %.9g --eps %.9g --wd %.9g --clip %.9g --warmup-steps %lld --min-lr-ratio %.9g",
                  cfg.train_file.c_str(), static_cast<long long>(cfg.batch_size * cfg.grad_accum),
                  static_cast<long long>(cfg.block_size), static_cast<long long>(steps),
                  static_cast<long long>(warmup), threads, cfg.optimizer.lr, cfg.optimizer.beta1, cfg.optimizer.beta2,
                  cfg.optimizer.eps, cfg.optimizer.weight_decay, cfg.clip_grad_norm,
                  static_cast<long long>(cfg.schedule.warmup_steps), cfg.schedule.min_lr_ratio);
    std::string why;
    const auto j = run_torch_script("bench_torch_train_config.py",
                                    "--model '" + config_json("config", mc).dump() + "' " + args +
                                        (cfg.precision == Precision::bf16 ? " --bf16" : ""),
                                    why);
    try {
      pt.tokens_per_s = j.at("tokens_per_s").get<double>();
      pt.seconds = j.at("seconds").get<double>();
      pt.peak_rss = j.at("peak_rss_bytes").get<double>();
      pt.first_loss = j.at("first_loss").get<double>();
      pt.last_loss = j.at("last_loss").get<double>();
      pt.params = j.at("params").get<std::int64_t>();
      pt.ok = true;
      note = "torch = PyTorch " + j.at("torch").get<std::string>() +
             " (bench/peers/torch/bench_torch_train_config.py), param counts " + (pt.params == param_count(mc) ? "match" : "DIFFER");
    } catch (const std::exception&) {
      note = "PyTorch column skipped: " + (why.empty() ? std::string("unexpected JSON") : why);
    }
    return pt;
  };

  // Rounds alternate the two engines, so a burst of load from elsewhere on a shared machine
  // hits both alike; each side's best round is reported (the least disturbed one).
  Side ours, pt;
  std::vector<std::pair<double, double>> per_round;
  for (int round = 0; round < rounds; ++round) {
    const Side o = run_ours();
    const Side t = run_torch();
    per_round.emplace_back(o.tokens_per_s, t.ok ? t.tokens_per_s : 0.0);
    if (!ours.ok || o.tokens_per_s > ours.tokens_per_s) ours = o;
    if (t.ok && (!pt.ok || t.tokens_per_s > pt.tokens_per_s)) pt = t;
    if (torch && !t.ok) break;  // PyTorch failed: its reason is in the note; no point repeating
  }
  ours.peak_rss = vm_hwm_bytes();  // the high-water mark over all rounds

  std::printf("\n== train-config: %s, %d threads, %s\n", config.c_str(), threads,
              cfg.precision == Precision::bf16
                  ? (std::string("bf16 mixed precision (tfm: ") + bf16_path_description() + "; torch: autocast bfloat16)").c_str()
                  : "fp32");
  std::printf("batch %lld x block %lld = %lld tokens/step, AdamW + clip %.3g + warm-up/cosine; %lld warm-up steps "
              "untimed, then %lld timed steps\n%s\n\n",
              static_cast<long long>(cfg.batch_size * cfg.grad_accum), static_cast<long long>(cfg.block_size),
              static_cast<long long>(tokens_per_step), cfg.clip_grad_norm, static_cast<long long>(warmup),
              static_cast<long long>(steps), note.c_str());
  if (rounds > 1) {
    for (std::size_t k = 0; k < per_round.size(); ++k)
      if (per_round[k].second > 0)
        std::printf("round %zu: tfm %.0f tokens/s, torch %.0f tokens/s, ratio %s\n", k + 1, per_round[k].first,
                    per_round[k].second, fmt_ratio(per_round[k].first / per_round[k].second).c_str());
      else
        std::printf("round %zu: tfm %.0f tokens/s\n", k + 1, per_round[k].first);
    std::printf("best round of each side below\n\n");
  }
  std::printf("%-6s %9s %10s %12s %12s %11s %11s\n", "side", "params", "step ms", "tokens/s", "peak RSS",
              "first loss", "last loss");
  auto row = [&](const char* name, const Side& s) {
    if (!s.ok) return;
    std::printf("%-6s %8.2fM %10.1f %12.0f %12s %11.4f %11.4f\n", name, static_cast<double>(s.params) * 1e-6,
                s.seconds / static_cast<double>(steps) * 1e3, s.tokens_per_s, format_bytes(s.peak_rss).c_str(),
                s.first_loss, s.last_loss);
  };
  row("tfm", ours);
  row("torch", pt);
  if (pt.ok)
    std::printf("%-6s %9s %10s %11.2fx %11.2fx   (tokens/s tfm/torch; peak RSS tfm/torch)\n", "ratio", "", "",
                ours.tokens_per_s / pt.tokens_per_s, ours.peak_rss / pt.peak_rss);
  std::fflush(stdout);
}

}  // namespace tfm::cli
