// tfm train CONFIG.json [--out DIR] [--max-steps N] [--resume DIR] [--seed S] [--max-memory BYTES]
//   [--checkpoint-activations] [--no-retrieval] [--retrieval-db train|train+val] [--tensor-parallel T]
//   [--pipeline-parallel P [--pipeline-schedule 1f1b|gpipe]]
// Ctrl-C finishes the current step, saves a checkpoint and exits cleanly.
// Under mpirun (mpirun -np N tfm train CONFIG) the ranks train data-parallel, or with
// --tensor-parallel T as N / T data-parallel replicas of a model split over T ranks; an error on any
// rank stops the whole job (dist::abort_job) instead of leaving the others waiting.
#include <atomic>
#include <csignal>
#include <cstdio>

#include "commands.h"
#include "dist/comm.h"
#include "tfm/memory_plan.h"
#include "tfm/train.h"

namespace tfm::cli {
namespace {

std::atomic<bool> g_interrupted{false};
extern "C" void on_sigint(int) { g_interrupted.store(true); }

}  // namespace

void add_train_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("train", "Train a model from a JSON config (see configs/)");
  struct Args {
    std::string config, out = "runs/train", resume;
    std::int64_t max_steps = -1;
    std::int64_t seed = -1;
    std::string max_memory;
    bool quiet = false;
    bool checkpoint_activations = false;
    bool no_retrieval = false;
    std::string retrieval_db;
    std::string precision;
    std::int64_t tensor_parallel = 0, pipeline_parallel = 0;
    std::string pipeline_schedule;
  };
  auto args = std::make_shared<Args>();
  cmd->add_option("config", args->config, "Train config JSON")->required()->check(CLI::ExistingFile);
  cmd->add_option("--out", args->out, "Model directory to write (checkpoints, metrics.jsonl, curves.svg)");
  cmd->add_option("--max-steps", args->max_steps, "Override training.max_steps")->check(CLI::PositiveNumber);
  cmd->add_option("--resume", args->resume, "Continue from the checkpoint in this directory");
  cmd->add_option("--seed", args->seed, "Override the config's seed")->check(CLI::NonNegativeNumber);
  cmd->add_flag("-q,--quiet", args->quiet, "No progress output");
  cmd->add_flag("--checkpoint-activations", args->checkpoint_activations,
                "Recompute each layer's forward in the backward pass (less memory, same gradients)");
  cmd->add_flag("--no-retrieval", args->no_retrieval,
                "A config without its retrieval: RETRO's decoder without chunked cross-attention and neighbours, a "
                "Fusion-in-Decoder (data.fusion) model reading the sources alone");
  cmd->add_option("--retrieval-db", args->retrieval_db,
                  "Override data.retrieval_db: the RETRO chunk database is the training split (train) or also the "
                  "held-out text (train+val, the leak)")
      ->check(CLI::IsMember({"train", "train+val"}));
  cmd->add_option("--precision", args->precision,
                  "Override training.precision: fp32, bf16 mixed precision, or auto (bf16 where the CPU has bf16 "
                  "dot products, else fp32; docs/training.md)")
      ->check(CLI::IsMember({"fp32", "bf16", "auto"}));
  cmd->add_option("--max-memory", args->max_memory,
                  "Refuse to start when the training memory plan exceeds BYTES (e.g. 2G; K/M/G = 1024^n)");
  cmd->add_option("--tensor-parallel", args->tensor_parallel,
                  "Override distributed.tensor_parallel: split the model over T consecutive ranks of the mpirun job "
                  "(its attention heads and FFN units); the N / T replicas train data-parallel")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--pipeline-parallel", args->pipeline_parallel,
                  "Override distributed.pipeline_parallel: split the model's layers (an LM's, an encoder "
                  "classifier's, both stacks of an encoder-decoder) into P stages, one per rank (mpirun -np P)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--pipeline-schedule", args->pipeline_schedule,
                  "Override distributed.pipeline_schedule: 1f1b (default) or gpipe (an encoder-decoder's stages run gpipe)")
      ->check(CLI::IsMember({"1f1b", "gpipe"}));
  cmd->callback([cmd, args] {
    TrainConfig cfg = load_train_config(args->config);
    // Without --out the model goes to runs/train: say so before the first step, not only at the end.
    if (cmd->count("--out") == 0 && !args->quiet && dist::rank() == 0)
      std::fprintf(stderr, "tfm train: writing the model to %s (no --out given)\n", args->out.c_str());
    if (args->checkpoint_activations) cfg.checkpoint_activations = true;
    if (args->no_retrieval) {
      cfg.no_retrieval = true;
      cfg.fusion.reset();
    }
    if (!args->retrieval_db.empty()) cfg.retrieval_db = args->retrieval_db;
    if (!args->precision.empty()) cfg.precision = training_precision(args->precision);
    if (args->seed >= 0) cfg.seed = static_cast<std::uint64_t>(args->seed);
    if (args->tensor_parallel > 0) cfg.tensor_parallel = args->tensor_parallel;
    if (args->pipeline_parallel > 0) cfg.pipeline_parallel = args->pipeline_parallel;
    if (!args->pipeline_schedule.empty()) cfg.pipeline_schedule = args->pipeline_schedule;
    TrainOptions opt;
    opt.out_dir = args->out;
    opt.max_steps = args->max_steps;
    opt.resume_dir = args->resume;
    opt.quiet = args->quiet;
    if (!args->max_memory.empty()) opt.max_memory_bytes = parse_byte_size(args->max_memory, "--max-memory");
    opt.on_step = [](std::int64_t, double) { return !g_interrupted.load(); };
    auto previous = std::signal(SIGINT, on_sigint);
    TrainResult r;
    try {
      r = run_training(cfg, opt);
    } catch (const std::exception& e) {
      std::signal(SIGINT, previous);
      if (dist::launched()) dist::abort_job(e.what(), 1);  // never returns
      throw;
    }
    std::signal(SIGINT, previous);
    const bool writer = dist::rank() == 0;
    dist::finalize();
    if (!writer) return;
    if (r.interrupted) {
      std::fprintf(stderr, "stopped at step %lld; model in %s\n", static_cast<long long>(r.final_step),
                   opt.out_dir.c_str());
      return;
    }
    std::fprintf(stderr, "done: step %lld, eval loss %.4f; model in %s\n", static_cast<long long>(r.final_step),
                 r.val_loss, opt.out_dir.c_str());
    if (!r.sample.empty()) std::printf("%s\n", r.sample.c_str());
  });
}

}  // namespace tfm::cli
