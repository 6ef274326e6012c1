// tfm eval's library side: load a model directory and its train_config.json, build the
// held-out data (the training run's seeded split, or a given file) and score it with the
// trainer's evaluate(), so training-time and CLI figures are computed by the same code.
#include <filesystem>

#include "tfm/error.h"
#include "tfm/load.h"
#include "tfm/quantize.h"
#include "tfm/memory_plan.h"
#include "tfm/metrics.h"
#include "tfm/gguf_model.h"
#include "tfm/train.h"
#include "train/task.h"

namespace tfm {
namespace {

namespace fs = std::filesystem;
using namespace train_detail;

TaskKind task_of(const ModelConfig& c) {
  if (c.text_tower.enabled()) return TaskKind::image_classifier;  // CLIP, zero-shot over the data's classes
  if (c.head == HeadKind::classifier) return c.reads_images() ? TaskKind::image_classifier : TaskKind::classifier;
  return c.architecture == Architecture::encoder_decoder ? TaskKind::seq2seq : TaskKind::lm;
}

}  // namespace

EvalReport evaluate_model_dir(const std::string& dir, const EvalOptions& opt) {
  TFM_CHECK(fs::is_directory(dir) || (is_gguf_path(dir) && fs::is_regular_file(dir)), "eval", "no model directory '",
            dir, "'");
  if (opt.max_memory_bytes > 0 && fs::is_directory(dir)) {  // from the two configs alone, before any weight is read
    const ModelConfig whole = load_model_config((fs::path(dir) / "config.json").string());
    // A shard's or a stage's plan under model parallelism.
    const ModelConfig mc = opt.parallel.tp_ranks > 1    ? tensor_parallel_config(whole, opt.parallel.tp_ranks)
                           : opt.parallel.pp_stages > 1 ? pipeline_config(whole, opt.parallel.pp_stage, opt.parallel.pp_stages)
                                                        : whole;
    const std::string tc_path = (fs::path(dir) / "train_config.json").string();
    const TrainConfig tc = fs::exists(tc_path) ? load_train_config(tc_path) : TrainConfig{};
    const std::int64_t batch = opt.batch_size > 0 ? opt.batch_size : tc.batch_size;
    std::int64_t ctx = task_of(mc) == TaskKind::lm ? (opt.context > 0 ? opt.context : tc.block_size) : tc.max_length;
    ctx = std::min(ctx, mc.max_positions);
    const MemoryPlan p = plan_memory(mc, ctx, batch, std::max(opt.parallel.tp_ranks, 1));
    check_memory_limit(p.total_bytes, opt.max_memory_bytes, "evaluating " + dir, summary(p), "lower --batch");
  }
  if (!opt.weight_type.empty()) parse_weight_type(opt.weight_type, "--dtype");  // the flag's name in the error
  LoadOptions lo;  // the library's one load path (tfm/load.h); eval runs whole sequences, no decode repacking
  lo.tp_rank = opt.parallel.tp_rank;
  lo.tp_ranks = opt.parallel.tp_ranks;
  lo.tp_sum = opt.parallel.tp_sum;
  lo.pp_stage = opt.parallel.pp_stage;
  lo.pp_stages = opt.parallel.pp_stages;
  lo.pp_comm = opt.parallel.pp_comm;
  lo.adapter = opt.adapter_dir;
  lo.dtype = opt.weight_type;
  lo.recipe = opt.weight_recipe;
  lo.repack = false;
  LoadedModel lm = load_model(dir, lo);
  const TaskKind task = task_of(lm.config);
  const bool zero_shot = lm.config.text_tower.enabled();
  TFM_CHECK(zero_shot || lm.config.head == HeadKind::lm || lm.config.head == HeadKind::classifier, "eval", dir,
            " holds a model with a ", to_string(lm.config.head), " head: tfm eval scores lm and classifier heads");
  TFM_CHECK(!zero_shot || opt.zero_shot_template.find("{}") != std::string::npos, "eval", "the zero-shot template '",
            opt.zero_shot_template, "' has no {} where the class name goes");
  const std::string cfg_path = (fs::path(dir) / "train_config.json").string();
  TrainConfig cfg;
  if (fs::exists(cfg_path)) {
    cfg = load_train_config(cfg_path);
    TFM_CHECK(cfg.task == task, "eval", cfg_path, " says task '", task_name(cfg.task), "' but the model is a ",
              task_name(task), " model");
  } else {
    TFM_CHECK(!opt.data_file.empty(), "eval", dir, " has no train_config.json (so no held-out split): pass --data FILE");
    cfg.task = task;
    cfg.block_size = std::min<std::int64_t>(lm.config.max_positions, 128);
    cfg.max_length = std::min<std::int64_t>(lm.config.max_positions, 128);
    cfg.source = dir;
    cfg.labels = lm.config.id2label;  // an image folder's classes are the model's
    if (lm.image_processor) cfg.preprocessor_json = lm.image_processor->source_json();
  }
  if (opt.batch_size > 0) cfg.batch_size = opt.batch_size;
  if (opt.context > 0) {
    TFM_CHECK(task == TaskKind::lm, "eval", "--ctx applies to language models only");
    TFM_CHECK(opt.context <= lm.config.max_positions || lm.config.position != PositionKind::learned, "eval",
              "--ctx ", opt.context, " exceeds the model's max_positions ", lm.config.max_positions);
    cfg.block_size = opt.context;
  }
  std::optional<Tokenizer> tok = lm.tokenizer;
  EvalReport rep;
  rep.task = task;
  TaskData d = opt.data_file.empty() ? make_task_data(cfg, tok) : make_eval_data(cfg, *tok, opt.data_file, opt.header);
  d.tok = &*tok;
  if (cfg.fusion) attach_fusion(cfg, d, *tok, (fs::path(dir) / kFusionIndexDir).string(), /*training=*/false);
  if (zero_shot) {
    for (const std::string& name : d.label_names) {
      std::string text = opt.zero_shot_template;
      text.replace(text.find("{}"), 2, name);
      d.zero_shot_texts.push_back(std::move(text));
    }
  }
  rep.data = !opt.data_file.empty() ? opt.data_file
             : !cfg.test_file.empty() ? "test split " + cfg.test_file
             : "held-out split of " + cfg.train_file;
  if (task == TaskKind::lm) {
    rep.examples = d.lm->val_sequences() * cfg.block_size;
    cfg.eval_batches = d.lm->val_sequences() / cfg.batch_size + 1;  // every window
  } else if (task == TaskKind::classifier || task == TaskKind::image_classifier) {
    rep.examples = d.images ? d.images->test_size() : d.cls->test_size();
    rep.positive_label = d.label_names.at(static_cast<std::size_t>(d.positive));
  } else {
    rep.examples = static_cast<std::int64_t>(d.s2s->test().size());
    cfg.bleu_examples = opt.bleu_examples < 0 ? rep.examples : opt.bleu_examples;
    if (opt.beam > 0) cfg.bleu_beam = opt.beam;
    rep.beam = cfg.bleu_beam;
    if (!opt.bleu_tokenize.empty()) {
      if (opt.bleu_tokenize != "auto") metrics::bleu_tokenizer_from_name(opt.bleu_tokenize);  // checks the name
      cfg.bleu_tokenize = opt.bleu_tokenize;
    }
  }
  EvalDetail detail;
  rep.metrics = evaluate(d, lm.model, cfg, &detail);
  rep.signatures = std::move(detail.signatures);
  rep.hypotheses = std::move(detail.hypotheses);
  rep.confusion = std::move(detail.confusion);
  return rep;
}

}  // namespace tfm
