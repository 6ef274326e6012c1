// The training loop of a decoder-only LM: setup (every check before any work), steps with
// gradient accumulation and clipping, evaluation, metrics, curves, checkpoints, the final
// sample. Each step's batch and dropout masks depend only on (seed, step, data cursor).
#include <chrono>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "tfm/autograd.h"
#include "tfm/error.h"
#include "tfm/ops.h"
#include "tfm/runtime.h"
#include "tfm/safetensors.h"
#include "tfm/train.h"
#include "train/progress.h"
#include "train/train_internal.h"

namespace tfm {
namespace {

using json = nlohmann::json;
using namespace train_detail;
namespace fs = std::filesystem;

struct Run {
  std::optional<Model> model;
  Tokenizer tok;
  std::optional<LmData> data;
  std::optional<Optimizer> opt;
  TrainState state;
  std::int64_t max_steps = 0;
};

ModelConfig lm_model_config(const TrainConfig& cfg, std::int64_t vocab) {
  json m = json::parse(cfg.model_json);
  if (!m.contains("vocab_size")) m["vocab_size"] = vocab;
  ModelConfig mc = parse_model_config(m.dump(), cfg.source + ".model");
  TFM_CHECK(mc.architecture == Architecture::decoder_only && mc.head == HeadKind::lm, cfg.source + ".model",
            "task 'lm' needs a decoder-only model with an lm head, got ", to_string(mc.architecture), " / ",
            to_string(mc.head));
  TFM_CHECK(mc.vocab_size >= vocab, cfg.source + ".model", "vocab_size ", mc.vocab_size, " < the tokenizer's ", vocab);
  TFM_CHECK(cfg.block_size <= mc.max_positions || mc.position != PositionKind::learned, cfg.source,
            "data.block_size ", cfg.block_size, " exceeds the model's max_positions ", mc.max_positions);
  return mc;
}

// Everything that can fail on bad input happens here, before the first step.
Run setup(const TrainConfig& cfg, const TrainOptions& opt) {
  Run r;
  r.max_steps = opt.max_steps > 0 ? opt.max_steps : cfg.max_steps;
  TFM_CHECK(fs::exists(cfg.train_file), cfg.source, "data.train: file '", cfg.train_file, "' not found");
  const std::string text = read_file(cfg.train_file);
  std::optional<LoadedCheckpoint> ck;
  if (!opt.resume_dir.empty()) {
    ck.emplace(load_checkpoint(opt.resume_dir));
    TFM_CHECK(ck->state.seed == cfg.seed, "resume", opt.resume_dir, " was trained with seed ", ck->state.seed,
              ", the config says ", cfg.seed);
    r.tok = ck->model.tokenizer;
  } else if (!cfg.tokenizer_path.empty()) {
    r.tok = Tokenizer::load(cfg.tokenizer_path);
  } else {
    // Train the tokenizer on the training split only (the held-out tail is never seen).
    const auto cut = static_cast<std::size_t>(static_cast<double>(text.size()) * (1.0 - cfg.val_fraction));
    TokenizerTrainOptions to;
    to.kind = tokenizer_kind_from_name(cfg.tokenizer_kind);
    to.vocab_size = cfg.tokenizer_vocab_size;
    r.tok = Tokenizer::train({text.substr(0, cut)}, to);
  }
  std::vector<std::int32_t> ids = r.tok.encode(text);
  const auto n_val = static_cast<std::size_t>(static_cast<double>(ids.size()) * cfg.val_fraction);
  std::vector<std::int32_t> val(ids.end() - static_cast<std::ptrdiff_t>(n_val), ids.end());
  ids.resize(ids.size() - n_val);
  r.data.emplace(std::move(ids), std::move(val), cfg.block_size, cfg.seed);
  TFM_CHECK(r.data->sequences_per_epoch() >= cfg.batch_size, cfg.source, "the training split holds ",
            r.data->sequences_per_epoch(), " sequences of block_size+1 tokens: too few for one batch of ",
            cfg.batch_size);
  TFM_CHECK(r.data->val_sequences() >= 1, cfg.source, "the held-out split is shorter than one sequence of ",
            cfg.block_size + 1, " tokens; raise data.val_fraction");

  const ModelConfig mc = lm_model_config(cfg, r.tok.vocab_size());
  r.opt.emplace(cfg.optimizer);
  if (ck) {
    TFM_CHECK(model_config_to_json(ck->model.config) == model_config_to_json(mc), "resume", opt.resume_dir,
              "/config.json differs from the config's model");
    r.model.emplace(std::move(ck->model.model));
    r.opt->load_state(ck->optimizer_state, ck->optimizer_steps, r.model->parameters());
    r.state = ck->state;
    TFM_CHECK(r.state.step <= r.max_steps, "resume", "checkpoint is at step ", r.state.step,
              ", beyond max_steps ", r.max_steps);
  } else {
    r.model.emplace(Model::create(mc, cfg.seed));
    r.state.seed = cfg.seed;
  }
  r.model.emplace(trainable(std::move(*r.model)));
  r.state.threads = num_threads();
  r.state.train_config_json = cfg.json.empty() ? "{}" : cfg.json;
  fs::create_directories(opt.out_dir);
  return r;
}

double evaluate(Model& model, LmData& data, const TrainConfig& cfg) {
  NoGradGuard no_grad;
  model.set_training(false);
  const std::int64_t total = std::min(data.val_sequences(), cfg.eval_batches * cfg.batch_size);
  double sum = 0;
  for (std::int64_t first = 0; first < total; first += cfg.batch_size) {
    const std::int64_t b = std::min(cfg.batch_size, total - first);
    Tensor x, y;
    data.val_batch(first, b, x, y);
    ModelInputs in;
    in.input_ids = x;
    const Tensor logits = model.forward(in).logits;
    const Tensor loss = cross_entropy(reshape(logits, {-1, logits.size(-1)}), reshape(y, {-1}), -100, 0.0f,
                                      LossReduction::sum);
    sum += loss.item();
  }
  model.set_training(true);
  return sum / static_cast<double>(total * cfg.block_size);
}

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

Model trainable(Model&& model) {
  std::map<std::string, Tensor> params = model.parameters();
  for (auto& [name, p] : params) p.requires_grad_();
  return Model::from_parameters(model.config(), std::move(params));
}

TrainResult run_training(const TrainConfig& cfg, const TrainOptions& opt) {
  Run r = setup(cfg, opt);
  Model& model = *r.model;
  auto& params = model.parameters();
  const std::string metrics_path = (fs::path(opt.out_dir) / "metrics.jsonl").string();
  const std::string svg_path = (fs::path(opt.out_dir) / "curves.svg").string();
  Curves curves = r.state.step > 0 ? reload_metrics(metrics_path, r.state.step) : Curves{};
  if (r.state.step == 0 && fs::exists(metrics_path)) fs::remove(metrics_path);
  Progress progress(opt.quiet, r.max_steps, cfg.log_every);
  progress.message("training " + std::to_string(model.parameter_count()) + " parameters, vocab " +
                   std::to_string(r.tok.vocab_size()) + ", " + std::to_string(r.data->train_tokens()) +
                   " training tokens, steps " + std::to_string(r.state.step) + " -> " + std::to_string(r.max_steps) +
                   ", " + std::to_string(num_threads()) + " threads");
  auto checkpoint = [&] { save_checkpoint(opt.out_dir, model, r.tok, *r.opt, r.state); };

  TrainResult result;
  model.set_training(true);
  const double tokens_per_step = static_cast<double>(cfg.batch_size * cfg.block_size * cfg.grad_accum);
  const auto t0 = std::chrono::steady_clock::now();
  std::int64_t done = 0;
  while (r.state.step < r.max_steps) {
    const std::int64_t step = r.state.step;  // 0-based index of the step being taken
    const double lr = learning_rate(cfg.schedule, cfg.optimizer.lr, step, r.max_steps);
    for (auto& [name, p] : params) p.zero_grad();
    double loss_sum = 0;
    for (std::int64_t micro = 0; micro < cfg.grad_accum; ++micro) {
      Tensor x, y;
      r.data->train_batch(r.state.data_cursor, cfg.batch_size, x, y);
      r.state.data_cursor += cfg.batch_size;
      model.set_dropout_seed(cfg.seed, static_cast<std::uint64_t>(step * cfg.grad_accum + micro));
      ModelInputs in;
      in.input_ids = x;
      const Tensor logits = model.forward(in).logits;
      Tensor loss = cross_entropy(reshape(logits, {-1, logits.size(-1)}), reshape(y, {-1}), -100,
                                  static_cast<float>(cfg.label_smoothing));
      loss_sum += loss.item();
      backward(cfg.grad_accum > 1 ? mul_scalar(loss, 1.0f / static_cast<float>(cfg.grad_accum)) : loss);
    }
    const double loss = loss_sum / static_cast<double>(cfg.grad_accum);
    const double gnorm = clip_grad_norm(params, cfg.clip_grad_norm);
    if (!std::isfinite(loss) || !std::isfinite(gnorm))
      fail("train", "step ", step + 1, ": ", !std::isfinite(loss) ? "loss" : "gradient norm", " is ",
           !std::isfinite(loss) ? loss : gnorm, "; stopped (the last checkpoint in ", opt.out_dir,
           " is kept; lower optimizer.lr or set training.clip_grad_norm)");
    r.opt->step(params, lr);
    r.state.step = step + 1;
    ++done;
    result.losses.push_back(loss);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    progress.step(r.state.step, loss, tokens_per_step * static_cast<double>(done) / std::max(secs, 1e-9), lr, done);
    if (r.state.step % cfg.log_every == 0 || r.state.step == r.max_steps) {
      append_metrics_line(metrics_path, R"({"step":)" + std::to_string(r.state.step) + R"(,"split":"train","loss":)" +
                                            fmt(loss) + R"(,"lr":)" + fmt(lr) + R"(,"grad_norm":)" + fmt(gnorm) + "}");
      curves.train_loss.push_back({r.state.step, loss});
    }
    const bool last = r.state.step == r.max_steps;
    const bool stop = (opt.on_step && !opt.on_step(r.state.step, loss));
    if (r.state.step % cfg.eval_every == 0 || last) {
      result.val_loss = evaluate(model, *r.data, cfg);
      append_metrics_line(metrics_path, R"({"step":)" + std::to_string(r.state.step) + R"(,"split":"val","loss":)" +
                                            fmt(result.val_loss) + R"(,"perplexity":)" + fmt(std::exp(result.val_loss)) + "}");
      curves.val_loss.push_back({r.state.step, result.val_loss});
      write_file_atomic(svg_path, loss_curves_svg(curves, "loss — " + cfg.source));
      progress.message("step " + std::to_string(r.state.step) + ": val loss " + fmt(result.val_loss) +
                       ", perplexity " + fmt(std::exp(result.val_loss)));
      if (cfg.checkpoint_every == 0) checkpoint();
    }
    if (cfg.checkpoint_every > 0 && (r.state.step % cfg.checkpoint_every == 0 || last)) checkpoint();
    if (stop) {
      checkpoint();
      progress.message("interrupted at step " + std::to_string(r.state.step) + "; checkpoint saved in " +
                       opt.out_dir + " (continue with --resume " + opt.out_dir + ")");
      result.interrupted = true;
      break;
    }
  }
  result.final_step = r.state.step;
  if (!result.interrupted && cfg.sample_tokens > 0) {
    std::vector<std::int32_t> prompt = r.tok.encode(cfg.sample_prompt);
    const auto out = sample_tokens(model, prompt, cfg.sample_tokens, cfg.sample_temperature, cfg.seed);
    result.sample = r.tok.decode(out);
  }
  return result;
}

}  // namespace tfm
