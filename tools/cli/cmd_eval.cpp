// tfm eval -m DIR [--data FILE] [--header] [--batch B] [--ctx N] [--bleu-examples N] [--beam K]
//          [--tokenize T] [--hyps FILE] [--json] [--tensor-parallel N | --pipeline-parallel N]
// Scores a trained model directory: LM loss/perplexity, classifier accuracy/precision/recall/
// F1, seq2seq loss + corpus BLEU and chrF2 (sacreBLEU's, each printed with its signature) of
// greedy or beam decoding; --hyps writes the translations scored, one a line (the same text
// tfm translate prints for those sources). Without --data: the held-out split that
// DIR/train_config.json names (the same seeded split the training run evaluated on).
// A CLIP model is scored zero-shot on --data FOLDER (class folders): each picture against every
// class's label text (--template "a photo of a {}.").
// mpirun -np N tfm eval ... --tensor-parallel N (or --pipeline-parallel N): each rank holds a
// shard (stage) and they score in lockstep; rank 0 prints.
#include <chrono>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "commands.h"
#include "dist/comm.h"
#include "tfm/error.h"
#include "tfm/memory_plan.h"
#include "eval_strided.h"
#include "tfm/runtime.h"
#include "tfm/safetensors.h"
#include "tfm/train.h"

namespace tfm::cli {

namespace {

struct EvalArgs {
  std::string dir;
  EvalOptions opt;
  std::string hyps_file, max_memory;
  bool json = false, verbose = false, kl = false;
  WeightOptions weights;
  std::int64_t stride = 0;
  ModelParallel parallel;
};

void run_eval(EvalArgs& a) {
  a.opt.weight_type = a.weights.dtype;
  a.opt.weight_recipe = a.weights.recipe;
  if (a.stride > 0) {
    TFM_CHECK(a.parallel.ranks() == 1, "eval", "--stride runs in one process (no --tensor-parallel/--pipeline-parallel)");
    return run_strided_eval(a.dir, a.opt.data_file, a.opt.context, a.stride, a.json, a.weights, a.kl);
  }
  set_model_parallel(a.opt.parallel, a.parallel);
  TFM_CHECK(!a.kl, "eval", "--kl-divergence needs --data FILE --stride S");
  const auto t0 = std::chrono::steady_clock::now();
  if (!a.max_memory.empty()) a.opt.max_memory_bytes = parse_byte_size(a.max_memory, "--max-memory");
  const EvalReport r = evaluate_model_dir(a.dir, a.opt);
  if (!a.hyps_file.empty() && dist::rank() == 0) {  // (model-parallel ranks all hold the same)
    TFM_CHECK(r.task == TaskKind::seq2seq, "eval", "--hyps applies to seq2seq models only");
    std::string text;
    for (const auto& h : r.hypotheses) text += h + "\n";
    write_file_atomic(a.hyps_file, text);
  }
  if (a.verbose) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "tfm: scored %lld %s in %.3f s (%.1f/s)\n", static_cast<long long>(r.examples),
                 r.task == TaskKind::lm ? "tokens" : "examples", s, s > 0 ? static_cast<double>(r.examples) / s : 0.0);
  }
  const char* task = task_name(r.task);
  if (a.json) {
    nlohmann::json j{{"model", a.dir}, {"task", task}, {"data", r.data}, {"examples", r.examples},
                     {"threads", num_threads()}};
    for (const auto& [k, v] : r.metrics) j[k] = std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
    for (const auto& [k, sig] : r.signatures) j[k + "_signature"] = sig;
    if (!r.positive_label.empty()) j["positive_label"] = r.positive_label;
    if (r.task == TaskKind::seq2seq) j["beam"] = r.beam;
    if (!r.confusion.empty()) j["confusion"] = r.confusion;
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("model    %s (%s)\ndata     %s\n%-8s %lld\n", a.dir.c_str(), task, r.data.c_str(),
              r.task == TaskKind::lm ? "tokens" : r.task == TaskKind::seq2seq ? "pairs" : "examples",
              static_cast<long long>(r.examples));
  if (!r.positive_label.empty()) std::printf("positive %s (precision, recall, f1)\n", r.positive_label.c_str());
  // The decoding is printed because it moves BLEU: tfm translate's default is beam 4, eval's
  // the training config's eval.beam (greedy unless set).
  if (r.task == TaskKind::seq2seq)
    std::printf("decoding %s (--beam)\n", r.beam > 1 ? ("beam " + std::to_string(r.beam)).c_str() : "greedy");
  std::printf("\n%-12s %10s\n", "metric", "value");
  for (const auto& [k, v] : r.metrics) {
    const auto sig = r.signatures.find(k);
    std::printf("%-12s %10.4f%s%s\n", k.c_str(), v, sig == r.signatures.end() ? "" : "  ",
                sig == r.signatures.end() ? "" : sig->second.c_str());
  }
}

}  // namespace

void add_eval_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("eval", "Evaluate a trained model directory on its held-out split or a file");
  auto args = std::make_shared<EvalArgs>();
  cmd->add_option("-m,--model", args->dir, "Model directory (from tfm train)")->required();
  add_adapter_option(cmd, args->opt.adapter_dir);
  add_weight_options(cmd, args->weights);
  cmd->add_flag("--kl-divergence", args->kl, "With --dtype and --stride: mean KL divergence from the f32 model");
  cmd->add_option("--data", args->opt.data_file,
                  "Text file (LM), label<TAB>text lines (classifier), source<TAB>target lines (seq2seq) or a folder of class folders (image classifier)");
  cmd->add_flag("--header", args->opt.header, "--data's first line is a header");
  cmd->add_option("--batch", args->opt.batch_size, "Batch size (default: the training config's)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--ctx", args->opt.context, "LM: window length in tokens (default: the training block_size)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--bleu-examples", args->opt.bleu_examples, "seq2seq: pairs decoded for BLEU (default: all)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--beam", args->opt.beam, "seq2seq: beam size for BLEU (default: the training config's, 1 = greedy)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--tokenize,--tok", args->opt.bleu_tokenize,
                  "seq2seq: BLEU tokenizer 13a, intl, zh, char, none or auto (default: the training config's eval.bleu_tokenize, "
                  "auto: zh for Chinese targets, else 13a)")
      ->check(CLI::IsMember({"auto", "13a", "intl", "zh", "char", "none"}));
  cmd->add_option("--template", args->opt.zero_shot_template,
                  "CLIP, zero-shot on --data FOLDER: the label text of a class, {} for its name (default \"a photo of a {}.\")");
  cmd->add_option("--hyps", args->hyps_file, "seq2seq: write the scored translations to this file, one a line");
  add_max_memory_option(cmd, args->max_memory);
  cmd->add_option("--stride", args->stride,
                  "LM on --data: strided windows of --ctx tokens (default: max_positions), as in transformers' "
                  "perplexity guide (docs/formats.md)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", args->json, "Print one JSON object instead of the table");
  cmd->add_flag("-v,--verbose", args->verbose, "Print the time taken and examples/s to stderr");
  add_model_parallel_options(cmd, args->parallel);
  cmd->callback([args] { run_model_parallel(args->parallel, [&] { run_eval(*args); }); });
}


}  // namespace tfm::cli
