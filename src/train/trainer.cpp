// The training loop of a decoder-only LM: setup (every check before any work), steps with
// gradient accumulation and clipping, evaluation, metrics, curves, checkpoints, the final
// sample. Each step's batch and dropout masks depend only on (seed, step, data cursor).
// Under mpirun the ranks share every step's micro-batches (train/data_parallel.h); rank 0
// alone writes checkpoints, metrics, curves and progress.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>

#include "tfm/autograd.h"
#include "tfm/error.h"
#include "tfm/quantize.h"
#include "tfm/memory_plan.h"
#include "tfm/ops.h"
#include "tfm/runtime.h"
#include "tfm/safetensors.h"
#include "tfm/session.h"
#include "tfm/train.h"
#include "train/data_parallel.h"
#include "train/distill.h"
#include "train/pipeline_train.h"
#include "train/progress.h"
#include "train/tensor_parallel_train.h"
#include "train/task.h"
#include "train/fine_tune.h"
#include "train/train_internal.h"

namespace tfm {
namespace {

using json = nlohmann::json;
using namespace train_detail;
namespace fs = std::filesystem;

struct Run {
  std::optional<Model> model;
  std::optional<Tokenizer> tok;
  TaskData data;
  std::optional<Optimizer> opt;
  TrainState state;
  std::int64_t max_steps = 0;
  std::string init_report;  // init_from: what was loaded, initialised and dropped
  std::string fusion_report;  // data.fusion: the passage index the examples read
  std::optional<Distiller> distill;
  std::map<std::string, Tensor> params;  // what the optimizer updates: the model's + distillation's projections
};

// The config as DIR/train_config.json records it: the data path made absolute (tfm eval
// runs from anywhere) and a classifier's label names in class order.
std::string model_dir_train_config(const TrainConfig& cfg, const TaskData& d) {
  if (cfg.json.empty()) return "{}";
  json j = json::parse(cfg.json);
  auto absolute = [](const std::string& path) {
    std::error_code ec;
    const fs::path abs = fs::absolute(path, ec);
    return ec ? path : abs.lexically_normal().string();
  };
  j["data"]["train"] = absolute(cfg.train_file);
  for (const auto& [key, path] : {std::pair<const char*, const std::string*>{"train_labels", &cfg.train_labels_file},
                                  {"test", &cfg.test_file}, {"test_labels", &cfg.test_labels_file}})
    if (!path->empty()) j["data"][key] = absolute(*path);
  // The fields that fix the held-out split and the evaluation, as this run used them (a
  // caller may have changed them after parsing, e.g. --seed).
  j["seed"] = cfg.seed;
  json& data = j["data"];
  data["val_fraction"] = cfg.val_fraction;
  data["block_size"] = cfg.block_size;
  data["test_fraction"] = cfg.test_fraction;
  data["test_size"] = cfg.test_size;
  data["max_length"] = cfg.max_length;
  data["header"] = cfg.header;
  if (!cfg.positive_label.empty()) data["positive_label"] = cfg.positive_label;
  if (!cfg.fusion) data.erase("fusion");  // (--no-retrieval)
  if (cfg.fusion) {
    data["fusion"]["encoder"] = absolute(resolve_beside_config(cfg, cfg.fusion->encoder, "data.fusion.encoder"));
    if (!cfg.fusion->passages.empty())
      data["fusion"]["passages"] = absolute(resolve_beside_config(cfg, cfg.fusion->passages, "data.fusion.passages"));
  }
  if (d.kind == TaskKind::classifier || d.kind == TaskKind::image_classifier) data["labels"] = d.label_names;
  j["training"]["batch_size"] = cfg.batch_size;
  j["training"]["precision"] = precision_name(cfg.precision);
  j["eval"]["bleu_examples"] = cfg.bleu_examples;
  j["eval"]["bleu_tokenize"] = cfg.bleu_tokenize;
  return j.dump();
}

// Everything that can fail on bad input happens here, before the first step.
Run setup(const TrainConfig& cfg, const TrainOptions& opt, const TensorParallel& tp, PipelineParallel& pp) {
  Run r;
  r.max_steps = opt.max_steps > 0 ? opt.max_steps : cfg.max_steps;
  std::optional<LoadedCheckpoint> ck;
  if (!opt.resume_dir.empty()) {
    ck.emplace(load_checkpoint(opt.resume_dir));
    TFM_CHECK(ck->state.seed == cfg.seed, "resume", opt.resume_dir, " was trained with seed ", ck->state.seed,
              ", the config says ", cfg.seed);
    r.tok = ck->model.tokenizer;
    if (ck->state.threads != num_threads())
      std::fprintf(stderr,
                   "warning: resuming %s with %d threads; it was trained with %lld, so the losses are not guaranteed to be "
                   "bit-identical to an uninterrupted run (use -t %lld for that)\n",
                   opt.resume_dir.c_str(), num_threads(), static_cast<long long>(ck->state.threads),
                   static_cast<long long>(ck->state.threads));
  } else if (!cfg.tokenizer_path.empty()) {
    r.tok = Tokenizer::load(cfg.tokenizer_path);
  }
  std::optional<LoadedModel> base;  // init_from: the starting weights and their tokenizer
  std::optional<ModelConfig> teacher;  // distill: the teacher's config (its weights load below)
  if (cfg.distill) teacher = teacher_config(*cfg.distill, cfg.source);
  TrainConfig task_cfg = cfg;
  if (!cfg.init_from.empty()) {
    base.emplace(load_model_dir(cfg.init_from));
    dequantize_model(base->model);  // a quantized GGUF starts training from its f32 values
    if (!ck && !cfg.init_from_new_tokenizer) r.tok = base->tokenizer;
    task_cfg.model_json = init_from_model_json(base->config, cfg.model_json);
    if (cfg.init_from_new_tokenizer && cfg.model_json.find("\"vocab_size\"") == std::string::npos)
      task_cfg.model_json = init_from_model_json(base->config, cfg.model_json, /*drop_vocab_size=*/true);
  }
  // A distilled student without a tokenizer of its own (init_from, tokenizer section) takes
  // the teacher's: the two must share one.
  if (cfg.distill && cfg.task != TaskKind::image_classifier && !r.tok && !json::parse(cfg.json).contains("tokenizer"))
    r.tok = Tokenizer::load(cfg.distill->teacher);
  if (cfg.no_retrieval) {  // the same model without its chunked cross-attention and neighbours
    json mj = json::parse(task_cfg.model_json);
    mj.erase("retrieval");
    task_cfg.model_json = mj.dump();
  }
  r.data = make_task_data(task_cfg, r.tok);  // trains the tokenizer when none was given
  if (task_cfg.fusion) {  // Fusion-in-Decoder: the passage index, kept in the model directory
    const std::string index_dir = (fs::path(opt.out_dir) / kFusionIndexDir).string();
    const std::int64_t passages = attach_fusion(task_cfg, r.data, *r.tok, index_dir, /*training=*/true);
    r.fusion_report = "Fusion-in-Decoder: " + std::to_string(passages) + " passages in " + index_dir + "; each example reads " +
                      std::to_string(task_cfg.fusion->k);
    r.data.model_files[kFusionFile] =
        json{{"index", kFusionIndexDir}, {"k", task_cfg.fusion->k}, {"template", task_cfg.fusion->part_template}}.dump(2) + "\n";
  }
  const ModelConfig mc = task_model_config(task_cfg, r.data, r.tok->vocab_size());
  pp.balance(tp.on() ? tensor_parallel_config(mc, tp.shards()) : mc, cfg);  // the stages' layers
  if (opt.max_memory_bytes > 0) {  // before the model, its gradients and optimiser state exist
    const int buffers = optimizer_buffers(cfg.optimizer);
    const std::int64_t seq = planned_positions(cfg, mc);
    // Under model parallelism, one stage's (its layers), one shard's (its heads and FFN units).
    ModelConfig planned = pp.on() ? pipeline_config(mc, pp.stage(), pp.stages(), pp.bounds()) : mc;
    if (tp.on()) planned = tensor_parallel_config(planned, tp.shards());
    const TrainingMemoryPlan plan = plan_training_memory(planned, cfg.batch_size, seq, buffers, cfg.checkpoint_activations);
    std::int64_t total = plan.total_bytes;
    std::string breakdown = summary(plan);
    if (teacher) {  // its weights and its no-grad forward (bounded by its training estimate); the projections
      const TrainingMemoryPlan t = plan_training_memory(*teacher, cfg.batch_size, seq, 0);
      const std::int64_t proj = static_cast<std::int64_t>(cfg.distill->hidden.size()) * teacher->d_model * mc.d_model *
                                4 * (2 + buffers);  // weights, gradients, optimizer state
      total += t.weight_bytes + t.activation_bytes + proj;
      char buf[200];
      std::snprintf(buf, sizeof buf, "; teacher: weights %.1f MiB + forward activations %.1f MiB (bound) + projections %.1f MiB; "
                    "in all %.1f MiB", static_cast<double>(t.weight_bytes) / 1048576.0,
                    static_cast<double>(t.activation_bytes) / 1048576.0, static_cast<double>(proj) / 1048576.0,
                    static_cast<double>(total) / 1048576.0);
      breakdown += buf;
    }
    check_memory_limit(total, opt.max_memory_bytes, "training " + cfg.source, breakdown,
                       "lower training.batch_size (grad_accum keeps the effective batch), the sequence length or the model size");
  }
  r.opt.emplace(cfg.optimizer);
  if (cfg.distill)
    r.distill.emplace(*cfg.distill, cfg.source, cfg.task, mc, cfg.task == TaskKind::image_classifier ? nullptr : &*r.tok,
                      cfg.task == TaskKind::lm ? cfg.block_size : cfg.max_length, cfg.seed);
  if (ck) {
    if (ck->model.config.id2label.empty()) ck->model.config.id2label = mc.id2label;  // written before id2label existed
    TFM_CHECK(model_config_to_json(ck->model.config) == model_config_to_json(mc), "resume", opt.resume_dir,
              "/config.json differs from the config's model");
    r.model.emplace(std::move(ck->model.model));
    pp.shard(*r.model);  // a checkpoint is the whole model, whatever layout wrote it
    tp.shard(*r.model);  // (a stage's shards split the stage)
    std::map<std::string, Tensor> all = r.model->parameters();
    if (r.distill) {
      r.distill->load(ck->state.training_tensors, opt.resume_dir);
      all.insert(r.distill->parameters().begin(), r.distill->parameters().end());
    }
    r.opt->load_state(tp.slice_state(*r.model, pp.slice_state(*r.model, ck->optimizer_state)), ck->optimizer_steps, all);
    r.state = ck->state;
    TFM_CHECK(r.state.step <= r.max_steps, "resume", "checkpoint is at step ", r.state.step,
              ", beyond max_steps ", r.max_steps);
  } else {
    r.model.emplace(Model::create(mc, cfg.seed));
    r.state.seed = cfg.seed;
    if (base) r.init_report = copy_matching_parameters(base->model, *r.model, cfg.init_skip);
    if (cfg.lora) r.model->add_lora(*cfg.lora, cfg.seed ^ 0x4C6F5241ull);
    if (cfg.bottleneck) r.model->add_bottleneck(*cfg.bottleneck, cfg.seed ^ 0x426F7474ull);
    if (cfg.prefix) r.model->add_prefix(*cfg.prefix, cfg.seed ^ 0x50726566ull);
  }
  if (!ck) {  // every shard or stage starts from the same whole initialisation
    pp.shard(*r.model);
    tp.shard(*r.model);
  }
  if (mc.retrieval.enabled()) {  // RETRO: its chunk database, for training, evaluation and the model directory
    r.data.retro.emplace(retro_database(task_cfg, r.data, mc.retrieval));
    r.model->set_retriever(r.data.retro->retriever());
    r.state.model_files[kRetrievalDbFile] = r.data.retro->serialize();
  }
  // Which parameters train: the layers share these handles, so the flag reaches them.
  const std::vector<std::string> fresh = base ? fresh_parameters(base->config, mc, cfg.init_skip) : std::vector<std::string>{};
  for (auto& [name, p] : r.model->parameters()) p.requires_grad_(is_trainable(cfg, name, fresh));
  // Handles to the same tensors (and autograd state), taken once the flags are set.
  r.params = r.model->parameters();
  if (r.distill) r.params.insert(r.distill->parameters().begin(), r.distill->parameters().end());
  // The projections ride along in every checkpoint (training_tensors), aliasing the live ones.
  r.state.training_tensors = r.distill ? r.distill->parameters() : std::map<std::string, Tensor>{};
  r.state.threads = num_threads();
  r.state.train_config_json = model_dir_train_config(cfg, r.data);
  if (r.data.images) r.state.model_files["preprocessor_config.json"] = r.data.images->processor().source_json() + "\n";
  for (const auto& [name, text] : r.data.model_files) r.state.model_files[name] = text;
  return r;
}

double mib(double bytes) { return bytes / (1024.0 * 1024.0); }

// What this rank holds, counted by the engine's allocator: the parameters, their gradients and
// the optimizer state, and the high-water mark of the training steps (the rest of it is
// activations, workspace and the data).
std::string memory_line(const std::map<std::string, Tensor>& params, const Optimizer& opt, std::size_t step_peak,
                        bool per_rank) {
  const auto peak = static_cast<double>(step_peak);
  double weights = 0, grads = 0, state = 0;
  for (const auto& [name, p] : params) {
    weights += static_cast<double>(p.nbytes());
    if (p.grad().defined()) grads += static_cast<double>(p.grad().nbytes());
  }
  for (const auto& [name, t] : opt.state()) state += static_cast<double>(t.nbytes());
  char buf[300];
  std::snprintf(buf, sizeof buf, "memory%s (allocator): weights %.2f MiB, gradients %.2f MiB, optimizer state %.2f MiB; "
                "peak of the steps %.2f MiB (%.2f MiB of it activations, workspace and data)",
                per_rank ? " of rank 0" : "", mib(weights), mib(grads), mib(state), mib(peak),
                mib(peak - weights - grads - state));
  return buf;
}

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

TrainResult run_training(const TrainConfig& cfg, const TrainOptions& opt) {
  check_output_dir(opt.out_dir);  // before the data and the tokenizer take their time
  TensorParallel tp(cfg);
  PipelineParallel pp(cfg);
  Run r = setup(cfg, opt, tp, pp);
  r.data.tok = &*r.tok;
  Model& model = *r.model;
  auto& params = r.params;  // the model's parameters (+ distillation's projections)
  DataParallel dp(cfg, params, pp.on() ? pp.replica_group() : tp.replica_group());
  // One writer per output directory: under mpirun rank 0 alone writes, so it alone locks.
  // With tensor parallelism every shard of the first replica evaluates and samples with it
  // (their forward passes run together).
  std::optional<OutputDirLock> out_lock;
  const bool writer = tp.writes(), first_replica = dp.writes();
  if (writer) out_lock.emplace(opt.out_dir);
  dp.check_same_model(params, opt.resume_dir.empty() ? "start" : "resume " + opt.resume_dir);
  dp.shard_optimizer_state(*r.opt, params);
  const SplitParameters split = pp.on() ? pp.norm_terms(model, tp.split_parameters(model)) : tp.split_parameters(model);
  const std::string metrics_path = (fs::path(opt.out_dir) / "metrics.jsonl").string();
  const std::string svg_path = (fs::path(opt.out_dir) / "curves.svg").string();
  const std::string confusion_path = (fs::path(opt.out_dir) / "confusion.svg").string();
  Curves curves;
  if (writer && r.state.step > 0) curves = reload_metrics(metrics_path, r.state.step);
  if (writer && r.state.step == 0 && fs::exists(metrics_path)) fs::remove(metrics_path);
  Progress progress(opt.quiet || !writer, r.max_steps, cfg.log_every);
  if (!r.init_report.empty()) progress.message(r.init_report);
  if (!r.fusion_report.empty()) progress.message(r.fusion_report);
  std::int64_t trainable = 0;
  for (const auto& [name, p] : model.parameters()) trainable += p.requires_grad() ? p.numel() : 0;
  if (trainable != model.parameter_count())
    progress.message("trainable: " + std::to_string(trainable) + " of " + std::to_string(model.parameter_count()) +
                     " parameters" + (model.has_lora() ? " (LoRA r " + std::to_string(model.lora_config().r) + ")"
                                      : model.has_bottleneck() ? std::string(" (bottleneck adapters, ") +
                                            to_string(model.bottleneck_config().placement) + ", size " +
                                            std::to_string(model.bottleneck_config().size(model.config().d_model)) + ")"
                                      : model.has_prefix() ? " (prefix tuning, " + std::to_string(model.prefix_length()) +
                                            " virtual tokens)" : ""));
  // Under model parallelism the whole model's count, and what this rank holds of it.
  std::int64_t whole_count = model.parameter_count();
  if (pp.on() || tp.on()) {
    whole_count = 0;
    for (const ParamSpec& p : parameter_specs(pp.on() ? model.pipeline_whole_config() : model.tensor_parallel_whole_config()))
      whole_count += shape_numel(p.shape);
  }
  progress.message("training " + std::to_string(whole_count) + " parameters" +
                   (whole_count != model.parameter_count() ? " (rank 0 holds " + std::to_string(model.parameter_count()) + ")"
                                                           : std::string()) + ", " +
                   (r.data.images ? std::to_string(r.data.images->train_size()) + " training images"
                                  : "vocab " + std::to_string(r.tok->vocab_size())) + ", steps " + std::to_string(r.state.step) + " -> " + std::to_string(r.max_steps) +
                   ", " + std::to_string(num_threads()) + " threads" +
                   (cfg.checkpoint_activations ? ", activation checkpointing" : ""));
  if (r.distill) progress.message(r.distill->summary());
  // Mixed precision for the whole run (training steps and evaluations), restored on return.
  const PrecisionScope precision_scope(cfg.precision);
  progress.message(std::string("precision: ") + precision_name(cfg.precision) +
                   (cfg.precision == Precision::bf16
                        ? std::string(" (matmuls and attention operands in bf16 via ") + bf16_path_description() +
                              "; weights, optimizer, norms, softmax, loss in fp32)"
                        : std::string()));
  if (const std::string dps = dp.summary(cfg.optimizer, params); !dps.empty()) progress.message(dps);
  if (const std::string tps = tp.summary(model); !tps.empty()) progress.message(tps);
  if (const std::string pps = pp.summary(model, cfg.grad_accum); !pps.empty()) progress.message(pps);
  std::int64_t saved_step = -1;
  auto checkpoint = [&] {  // every rank calls it (ZeRO-1 gathers the optimizer state)
    if (saved_step == r.state.step) return;
    const std::optional<Optimizer> whole = dp.gathered_optimizer(*r.opt, params);
    const Optimizer& state = whole ? *whole : *r.opt;
    // Model parallelism: the first replica's shards (stages) each write the whole tensors they
    // own into one sharded directory, which any layout resumes and every command loads.
    if (pp.on() && first_replica)
      save_sharded_checkpoint(opt.out_dir, pp.model_group(), pp.checkpoint_part(model, state, tp), *r.tok, r.state);
    else if (tp.on() && first_replica)
      save_sharded_checkpoint(opt.out_dir, tp.shard_group(), tp.checkpoint_part(model, state), *r.tok, r.state);
    else if (writer && !pp.on() && !tp.on())
      save_checkpoint(opt.out_dir, model, *r.tok, state, r.state);
    saved_step = r.state.step;
  };

  TrainResult result;
  std::size_t step_peak = 0;  // the allocator's high-water mark within the steps (not evaluation or saving)
  model.set_training(true);
  model.set_checkpoint_activations(cfg.checkpoint_activations);
  double tokens_seen = 0;
  const auto t0 = std::chrono::steady_clock::now();
  std::int64_t done = 0;
  while (r.state.step < r.max_steps) {
    const std::int64_t step = r.state.step;  // 0-based index of the step being taken
    const double lr = learning_rate(cfg.schedule, cfg.optimizer.lr, step, r.max_steps);
    for (auto& [name, p] : params) p.zero_grad();
    reset_peak_memory();
    tp.step_begin();
    // This rank's parts of the step's micro-batches (data_parallel.h). A micro-batch split across
    // ranks needs its loss terms counted on all of them before any part's loss is weighted.
    const std::vector<MicroBatchPiece>& pieces = dp.pieces();
    const auto load = [&](const MicroBatchPiece& p) {
      return load_micro_batch(r.data, model, cfg, r.state.data_cursor + p.micro * cfg.batch_size + p.first_row, p.rows);
    };
    std::vector<MicroBatch> loaded;
    std::vector<double> terms(static_cast<std::size_t>(cfg.grad_accum), 0.0);
    if (dp.splits_micro_batches()) {
      for (const MicroBatchPiece& p : pieces) {
        loaded.push_back(load(p));
        terms[static_cast<std::size_t>(p.micro)] += static_cast<double>(loaded.back().loss_terms);
      }
      terms = dp.sum_per_micro(std::move(terms));
    }
    // (loss, tokens) per micro-batch: this rank's parts, then the sums over all ranks.
    std::vector<double> mine(2 * static_cast<std::size_t>(cfg.grad_accum), 0.0);
    if (pp.on()) {  // the stages run this pipeline's micro-batches (whole ones) through the schedule
      std::vector<std::int64_t> micros;
      for (const MicroBatchPiece& p : pieces) micros.push_back(p.micro);
      PipelineParallel::Hooks hooks;
      hooks.before_forward = [&](std::int64_t k) {
        model.set_dropout_seed(cfg.seed, static_cast<std::uint64_t>(step * cfg.grad_accum + k));
      };
      hooks.before_backward = [&](bool last) { dp.before_backward(last); };
      hooks.after_backward = [&] { dp.after_backward(); };
      mine = pp.step(
          model, micros, cfg.grad_accum,
          [&](std::int64_t k) { return load(MicroBatchPiece{k, 0, cfg.batch_size}); },
          [&](const MicroBatch& b, const Tensor& logits) { return logits_loss(model, logits, b.targets, cfg); }, hooks);
    } else {  // this rank's micro-batches (or parts of them), one after the other
      for (std::size_t k = 0; k < pieces.size(); ++k) {
        const MicroBatchPiece& p = pieces[k];
        const MicroBatch batch = loaded.empty() ? load(p) : std::move(loaded[k]);
        model.set_dropout_seed(cfg.seed, static_cast<std::uint64_t>(step * cfg.grad_accum + p.micro));
        model.set_dropout_rows(p.first_row, p.rows, cfg.batch_size);
        Tensor loss = micro_batch_loss(batch, model, cfg, r.distill ? &*r.distill : nullptr);
        if (p.rows != cfg.batch_size)  // its share of the micro-batch's mean
          loss = mul_scalar(loss, static_cast<float>(static_cast<double>(batch.loss_terms) /
                                                     std::max(terms[static_cast<std::size_t>(p.micro)], 1.0)));
        mine[2 * static_cast<std::size_t>(p.micro)] += loss.item();
        mine[2 * static_cast<std::size_t>(p.micro) + 1] += static_cast<double>(batch.tokens);
        dp.before_backward(k + 1 == pieces.size());
        backward(cfg.grad_accum > 1 ? mul_scalar(loss, 1.0f / static_cast<float>(cfg.grad_accum)) : loss);
        dp.after_backward();
      }
    }
    model.set_dropout_rows(0, 0, 0);
    dp.sum_gradients();
    pp.sum_shared_gradients(model, params);  // after the replicas' sums: the stages' parts of the shared ones
    const std::vector<double> all = dp.sum_per_micro(std::move(mine));
    r.state.data_cursor += cfg.grad_accum * cfg.batch_size;
    double loss_sum = 0;
    for (std::size_t i = 0; i < all.size(); i += 2) {
      loss_sum += all[i];
      tokens_seen += all[i + 1];
    }
    const double loss = loss_sum / static_cast<double>(cfg.grad_accum);
    if (cfg.gradient_noise > 0) add_gradient_noise(params, cfg.gradient_noise, cfg.gradient_noise_gamma, step, cfg.seed);
    const double gnorm = clip_grad_norm(params, cfg.clip_grad_norm, tp.on() || pp.on() ? &split : nullptr);
    if (!std::isfinite(loss) || !std::isfinite(gnorm))
      fail("train", "step ", step + 1, ": ", !std::isfinite(loss) ? "loss" : "gradient norm", " is ",
           !std::isfinite(loss) ? loss : gnorm, "; stopped (the last checkpoint in ", opt.out_dir,
           " is kept; lower optimizer.lr or set training.clip_grad_norm)");
    dp.optimizer_step(*r.opt, params, lr);
    step_peak = std::max(step_peak, memory_stats().peak_bytes);
    tp.step_end();
    r.state.step = step + 1;
    ++done;
    result.losses.push_back(loss);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    progress.step(r.state.step, loss, tokens_seen / std::max(secs, 1e-9), lr, done);
    if (writer && (r.state.step % cfg.log_every == 0 || r.state.step == r.max_steps)) {
      append_metrics_line(metrics_path, R"({"step":)" + std::to_string(r.state.step) + R"(,"split":"train","loss":)" +
                                            fmt(loss) + R"(,"lr":)" + fmt(lr) + R"(,"grad_norm":)" + fmt(gnorm) + "}");
      curves.train_loss.push_back({r.state.step, loss});
    }
    const bool last = r.state.step == r.max_steps;
    const bool stop = dp.stop_requested(opt.on_step && !opt.on_step(r.state.step, loss));
    if ((r.state.step % cfg.eval_every == 0 || last) && first_replica) {
      EvalDetail detail;
      result.val_metrics = evaluate(r.data, model, cfg, &detail);
      result.val_loss = result.val_metrics.at("loss");
      std::string line = R"({"step":)" + std::to_string(r.state.step) + R"(,"split":"val")", text;
      for (const auto& [k, v] : result.val_metrics) {
        line += ",\"" + k + "\":" + fmt(v);
        text += (text.empty() ? "" : ", ") + k + " " + fmt(v);
        const auto sig = detail.signatures.find(k);  // BLEU/chrF: the sacreBLEU signature beside the score
        if (sig == detail.signatures.end()) continue;
        line += ",\"" + k + "_signature\":" + json(sig->second).dump();
        text += " (" + sig->second + ")";
      }
      if (writer) {
        append_metrics_line(metrics_path, line + "}");
        curves.val_loss.push_back({r.state.step, result.val_loss});
        write_file_atomic(svg_path, loss_curves_svg(curves, "loss — " + cfg.source));
        if (!detail.confusion.empty())
          write_file_atomic(confusion_path, confusion_matrix_svg(detail.confusion, r.data.label_names,
                                                                 "test split, step " + std::to_string(r.state.step)));
      }
      progress.message("step " + std::to_string(r.state.step) + ": eval " + text);
    }
    if ((r.state.step % cfg.eval_every == 0 || last) && cfg.checkpoint_every == 0) checkpoint();
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
  if (const std::string t = dp.timing(); !t.empty()) progress.message(t);
  if (const std::string t = pp.timing(); !t.empty()) progress.message(t);
  if (const std::string t = tp.traffic(); !t.empty()) progress.message(t);
  if (done > 0) progress.message(memory_line(params, *r.opt, step_peak, tp.on() || pp.on() || dp.ranks() > 1));
  if (!result.interrupted && first_replica && cfg.task == TaskKind::lm && cfg.sample_tokens > 0) {
    // Plain temperature sampling (no top-k/top-p/min-p) with the KV-cache generator. In fp32
    // whatever the training precision: it is inference (as `tfm generate` runs it), and its
    // one-row products would spend their time packing whole weight matrices for bf16.
    const PrecisionScope inference_precision(Precision::fp32);
    Generator gen(model, *r.tok, {});
    GenerateOptions o;
    o.max_new_tokens = cfg.sample_tokens;
    o.stop_at_eos = false;
    o.sampling.temperature = cfg.sample_temperature;
    o.sampling.top_k = 0;
    o.sampling.top_p = 1.0;
    o.sampling.min_p = 0.0;
    o.sampling.seed = cfg.seed;
    result.sample = cfg.sample_prompt + gen.generate(cfg.sample_prompt, o).text;
  }
  return result;
}

}  // namespace tfm
