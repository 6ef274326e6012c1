// tfm eval -m DIR [--data FILE] [--header] [--batch B] [--ctx N] [--bleu-examples N] [--beam K]
//          [--tokenize T] [--hyps FILE] [--json]
// Scores a trained model directory: LM loss/perplexity, classifier accuracy/precision/recall/
// F1, seq2seq loss + corpus BLEU and chrF2 (sacreBLEU's, each printed with its signature) of
// greedy or beam decoding; --hyps writes the translations scored, one a line (the same text
// tfm translate prints for those sources). Without --data: the held-out split that
// DIR/train_config.json names (the same seeded split the training run evaluated on).
#include <chrono>
#include <cmath>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "commands.h"
#include "tfm/error.h"
#include "tfm/memory_plan.h"
#include "eval_strided.h"
#include "tfm/runtime.h"
#include "tfm/safetensors.h"
#include "tfm/train.h"

namespace tfm::cli {

void add_eval_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("eval", "Evaluate a trained model directory on its held-out split or a file");
  struct Args {
    std::string dir;
    EvalOptions opt;
    std::string hyps_file, max_memory;
    bool json = false, verbose = false, kl = false;
    WeightOptions weights;
    std::int64_t stride = 0;
  };
  auto args = std::make_shared<Args>();
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
  cmd->add_option("--hyps", args->hyps_file, "seq2seq: write the scored translations to this file, one a line");
  add_max_memory_option(cmd, args->max_memory);
  cmd->add_option("--stride", args->stride,
                  "LM on --data: strided windows of --ctx tokens (default: max_positions), as in transformers' "
                  "perplexity guide (docs/formats.md)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", args->json, "Print one JSON object instead of the table");
  cmd->add_flag("-v,--verbose", args->verbose, "Print the time taken and examples/s to stderr");
  cmd->callback([args] {
    args->opt.weight_type = args->weights.dtype;
    args->opt.weight_recipe = args->weights.recipe;
    if (args->stride > 0)
      return run_strided_eval(args->dir, args->opt.data_file, args->opt.context, args->stride, args->json, args->weights,
                              args->kl);
    TFM_CHECK(!args->kl, "eval", "--kl-divergence needs --data FILE --stride S");
    const auto t0 = std::chrono::steady_clock::now();
    if (!args->max_memory.empty()) args->opt.max_memory_bytes = parse_byte_size(args->max_memory, "--max-memory");
    const EvalReport r = evaluate_model_dir(args->dir, args->opt);
    if (!args->hyps_file.empty()) {
      TFM_CHECK(r.task == TaskKind::seq2seq, "eval", "--hyps applies to seq2seq models only");
      std::string text;
      for (const auto& h : r.hypotheses) text += h + "\n";
      write_file_atomic(args->hyps_file, text);
    }
    if (args->verbose) {
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::fprintf(stderr, "tfm: scored %lld %s in %.3f s (%.1f/s)\n", static_cast<long long>(r.examples),
                   r.task == TaskKind::lm ? "tokens" : "examples", s, s > 0 ? static_cast<double>(r.examples) / s : 0.0);
    }
    const char* task = task_name(r.task);
    if (args->json) {
      nlohmann::json j{{"model", args->dir}, {"task", task}, {"data", r.data}, {"examples", r.examples},
                       {"threads", num_threads()}};
      for (const auto& [k, v] : r.metrics) j[k] = std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr);
      for (const auto& [k, sig] : r.signatures) j[k + "_signature"] = sig;
      if (!r.positive_label.empty()) j["positive_label"] = r.positive_label;
      if (r.task == TaskKind::seq2seq) j["beam"] = r.beam;
      if (!r.confusion.empty()) j["confusion"] = r.confusion;
      std::printf("%s\n", j.dump().c_str());
      return;
    }
    std::printf("model    %s (%s)\ndata     %s\n%-8s %lld\n", args->dir.c_str(), task, r.data.c_str(),
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
  });
}

}  // namespace tfm::cli
