// The train config: one JSON file, parsed once into TrainConfig. Every section rejects keys it
// does not know (listing the allowed ones) and range-checks its values.
#include <filesystem>
#include <nlohmann/json.hpp>

#include "tfm/error.h"
#include "tfm/image.h"
#include "tfm/safetensors.h"
#include "tfm/runtime.h"
#include "tfm/train.h"

namespace tfm {
namespace {

using json = nlohmann::json;

// Reads the keys of one JSON object, remembering which were used, so that leftovers can be
// reported with the allowed list.
class Section {
 public:
  Section(const json& j, std::string where, std::vector<std::string> allowed)
      : j_(j), where_(std::move(where)), allowed_(std::move(allowed)) {
    TFM_CHECK(j_.is_object(), where_, "must be a JSON object, got ", j_.dump());
    for (const auto& [k, v] : j_.items()) {
      bool ok = false;
      for (const auto& a : allowed_) ok = ok || a == k;
      if (!ok) {
        std::string list;
        for (const auto& a : allowed_) list += (list.empty() ? "" : ", ") + a;
        fail(where_, "unknown key '", k, "' (allowed: ", list, ")");
      }
    }
  }
  bool has(const char* k) const { return j_.contains(k); }
  const json& at(const char* k) const { return j_.at(k); }
  std::string key(const char* k) const { return where_ + "." + k; }
  void get_int(const char* k, std::int64_t& out, std::int64_t lo, std::int64_t hi = INT64_MAX) const {
    if (!has(k)) return;
    const json& v = j_.at(k);
    TFM_CHECK(v.is_number_integer(), key(k), "must be an integer, got ", v.dump());
    out = v.get<std::int64_t>();
    TFM_CHECK(out >= lo && out <= hi, key(k), "must be in [", lo, ", ", hi, "], got ", out);
  }
  void get_double(const char* k, double& out, double lo, double hi) const {
    if (!has(k)) return;
    const json& v = j_.at(k);
    TFM_CHECK(v.is_number(), key(k), "must be a number, got ", v.dump());
    out = v.get<double>();
    TFM_CHECK(out >= lo && out <= hi, key(k), "must be in [", lo, ", ", hi, "], got ", out);
  }
  void get_bool(const char* k, bool& out) const {
    if (!has(k)) return;
    TFM_CHECK(j_.at(k).is_boolean(), key(k), "must be true or false, got ", j_.at(k).dump());
    out = j_.at(k).get<bool>();
  }
  void get_string(const char* k, std::string& out, const std::vector<std::string>& choices = {}) const {
    if (!has(k)) return;
    TFM_CHECK(j_.at(k).is_string(), key(k), "must be a string, got ", j_.at(k).dump());
    out = j_.at(k).get<std::string>();
    if (choices.empty()) return;
    std::string list;
    for (const auto& c : choices) {
      if (c == out) return;
      list += (list.empty() ? "" : ", ") + c;
    }
    fail(key(k), "unknown value '", out, "' (allowed: ", list, ")");
  }

 private:
  const json& j_;
  std::string where_;
  std::vector<std::string> allowed_;
};

// One side of a "distill.hidden" pair: N (the model's only stack) or "enc.N" / "dec.N".
DistillLayer distill_layer(const json& v, const std::string& where) {
  DistillLayer l;
  if (v.is_number_integer()) {
    l.index = v.get<std::int64_t>();
  } else {
    const std::string s = v.is_string() ? v.get<std::string>() : "";
    const bool enc = s.rfind("enc.", 0) == 0, dec = s.rfind("dec.", 0) == 0;
    const std::string num = s.size() > 4 ? s.substr(4) : "";
    TFM_CHECK((enc || dec) && !num.empty() && num.size() < 10 && num.find_first_not_of("0123456789") == std::string::npos,
              where, "must be a layer number or \"enc.N\" / \"dec.N\", got ", v.dump());
    l.index = std::stoll(num);
    l.encoder = enc;
    l.stack_named = true;
  }
  TFM_CHECK(l.index >= 0, where, "layer numbers count from 0 (the embeddings), got ", l.index);
  return l;
}

const json& section(const json& root, const char* name) {
  static const json empty = json::object();
  return root.contains(name) ? root.at(name) : empty;
}

}  // namespace

Precision training_precision(const std::string& name) {
  if (name != "auto") return precision_from_name(name);
  return std::string_view(bf16_path_description()).starts_with("emulated") ? Precision::fp32 : Precision::bf16;
}

const char* task_name(TaskKind k) {
  switch (k) {
    case TaskKind::lm: return "lm";
    case TaskKind::classifier: return "classifier";
    case TaskKind::seq2seq: return "seq2seq";
    case TaskKind::image_classifier: return "image_classifier";
    case TaskKind::speech: return "speech";
  }
  return "?";
}

TrainConfig parse_train_config(const std::string& json_text, const std::string& where) {
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::exception& e) {
    fail(where, "not valid JSON: ", e.what());
  }
  TrainConfig c;
  c.source = where;
  c.json = root.dump();
  const Section top(root, where, {"task", "seed", "model", "tokenizer", "data", "optimizer", "schedule",
                                  "training", "eval", "checkpoint", "sample", "init_from", "init_skip", "lora", "adapter", "trainable",
                                  "distributed", "distill"});
  std::string task = "lm";
  top.get_string("task", task, {"lm", "classifier", "seq2seq", "image_classifier", "speech"});
  c.task = task == "classifier" ? TaskKind::classifier : task == "seq2seq" ? TaskKind::seq2seq
           : task == "image_classifier" ? TaskKind::image_classifier
           : task == "speech"           ? TaskKind::speech
                                        : TaskKind::lm;
  std::int64_t seed = static_cast<std::int64_t>(c.seed);
  top.get_int("seed", seed, 0);
  c.seed = static_cast<std::uint64_t>(seed);
  top.get_string("init_from", c.init_from);
  TFM_CHECK(!c.init_from.empty() || (top.has("model") && root.at("model").is_object()), where,
            "needs a \"model\" object (or \"init_from\": a model directory to start from)");
  TFM_CHECK(!top.has("model") || root.at("model").is_object(), where + ".model", "must be an object");
  c.model_json = top.has("model") ? root.at("model").dump() : "{}";
  // init_from brings its model's tokenizer; a "tokenizer" beside it replaces it with a new
  // vocabulary (the token embeddings then start fresh: adapting to a new script).
  c.init_from_new_tokenizer = !c.init_from.empty() && top.has("tokenizer");
  if (top.has("lora")) {
    const Section l(section(root, "lora"), where + ".lora", {"r", "alpha", "dropout", "target_modules"});
    LoraConfig lc;
    l.get_int("r", lc.r, 1, 4096);
    l.get_double("alpha", lc.alpha, 1e-6, 1e6);
    l.get_double("dropout", lc.dropout, 0.0, 0.999);
    TFM_CHECK(l.has("target_modules") && l.at("target_modules").is_array() && !l.at("target_modules").empty(),
              l.key("target_modules"), "must be a non-empty list of module names or patterns (e.g. [\"q_proj\", "
              "\"v_proj\"])");
    for (const auto& t : l.at("target_modules")) {
      TFM_CHECK(t.is_string(), l.key("target_modules"), "entries must be strings, got ", t.dump());
      lc.target_modules.push_back(t.get<std::string>());
    }
    c.lora = lc;
  }
  if (top.has("adapter")) {
    const json& a = section(root, "adapter");
    TFM_CHECK(!c.lora, where, "\"lora\" and \"adapter\" exclude each other: one adapter at a time");
    TFM_CHECK(a.contains("type") && a.at("type").is_string(), where + ".adapter.type",
              "must be \"bottleneck\" or \"prefix_tuning\"");
    const std::string type = a.at("type").get<std::string>();
    if (type == "bottleneck") {
      const Section b(a, where + ".adapter", {"type", "placement", "reduction_factor", "bottleneck_size",
                                                "non_linearity"});
      BottleneckConfig bc;
      std::string placement = "houlsby", act = "relu";
      b.get_string("placement", placement, {"houlsby", "pfeiffer"});
      b.get_string("non_linearity", act, {"relu", "gelu", "swish"});
      bc.placement = parse_bottleneck_placement(placement, b.key("placement"));
      bc.non_linearity = parse_bottleneck_activation(act, b.key("non_linearity"));
      b.get_double("reduction_factor", bc.reduction_factor, 1e-3, 1e6);
      b.get_int("bottleneck_size", bc.bottleneck_size, 1, 1 << 20);
      c.bottleneck = bc;
    } else if (type == "prefix_tuning") {
      const Section p(a, where + ".adapter", {"type", "num_virtual_tokens", "prefix_projection",
                                                "encoder_hidden_size"});
      PrefixConfig pc;
      p.get_int("num_virtual_tokens", pc.num_virtual_tokens, 1, 4096);
      p.get_bool("prefix_projection", pc.prefix_projection);
      p.get_int("encoder_hidden_size", pc.encoder_hidden_size, 1, 1 << 20);
      c.prefix = pc;
    } else {
      fail(where + ".adapter.type", "'", type, "' is not one of: bottleneck, prefix_tuning (LoRA: the \"lora\" key)");
    }
  }
  if (top.has("init_skip")) {
    const json& t = root.at("init_skip");
    TFM_CHECK(!c.init_from.empty() && t.is_array(), where + ".init_skip", "must be a list of parameter-name patterns, "
              "with init_from");
    for (const auto& p : t) {
      TFM_CHECK(p.is_string(), where + ".init_skip", "entries must be strings, got ", p.dump());
      c.init_skip.push_back(p.get<std::string>());
    }
  }
  if (top.has("trainable")) {
    const json& t = root.at("trainable");
    TFM_CHECK(t.is_array() && !t.empty(), where + ".trainable", "must be a non-empty list of parameter-name patterns");
    for (const auto& p : t) {
      TFM_CHECK(p.is_string(), where + ".trainable", "entries must be strings, got ", p.dump());
      c.trainable.push_back(p.get<std::string>());
    }
  }

  if (top.has("distill")) {
    const Section ds(section(root, "distill"), where + ".distill", {"teacher", "kind", "temperature", "alpha", "hidden",
                                                                   "hidden_weight"});
    DistillConfig dc;
    ds.get_string("teacher", dc.teacher);
    TFM_CHECK(!dc.teacher.empty(), ds.key("teacher"), "is required: the teacher's model directory");
    std::string kind = "soft";
    ds.get_string("kind", kind, {"soft", "hard"});
    dc.hard = kind == "hard";
    ds.get_double("temperature", dc.temperature, 1e-3, 1e3);
    ds.get_double("alpha", dc.alpha, 0.0, 1.0);
    ds.get_double("hidden_weight", dc.hidden_weight, 0.0, 1e6);
    if (ds.has("hidden")) {
      const json& h = ds.at("hidden");
      TFM_CHECK(h.is_array(), ds.key("hidden"), "must be a list of [student_layer, teacher_layer] pairs");
      for (std::size_t i = 0; i < h.size(); ++i) {
        const std::string at = ds.key("hidden") + "[" + std::to_string(i) + "]";
        TFM_CHECK(h[i].is_array() && h[i].size() == 2, at, "must be a pair [student_layer, teacher_layer], got ",
                  h[i].dump());
        dc.hidden.emplace_back(distill_layer(h[i][0], at + "[0]"), distill_layer(h[i][1], at + "[1]"));
      }
    }
    c.distill = dc;
  }

  const Section tok(section(root, "tokenizer"), where + ".tokenizer", {"kind", "vocab_size", "min_freq", "path",
                                                                          "isolate_cjk"});
  tok.get_string("kind", c.tokenizer_kind, {"char", "word", "bpe"});
  tok.get_int("vocab_size", c.tokenizer_vocab_size, 0);
  tok.get_string("path", c.tokenizer_path);
  tok.get_int("min_freq", c.tokenizer_min_freq, 0);
  tok.get_bool("isolate_cjk", c.tokenizer_isolate_cjk);
  TFM_CHECK(!c.tokenizer_isolate_cjk || c.tokenizer_kind == "bpe", where + ".tokenizer",
            "isolate_cjk applies to kind \"bpe\" only (char is per character already)");

  const Section data(section(root, "data"), where + ".data", {"train", "val_fraction", "block_size", "test_fraction",
                                                                    "max_length", "header", "positive_label", "test_size", "labels",
                                                                    "train_labels", "test", "test_labels", "preprocessor",
                                                                    "augment", "chunk_length", "spec_augment",
                                                                    "timestamps_fraction", "hop_length", "pack_fraction", "retrieval_db", "fusion"});
  data.get_string("train", c.train_file);
  TFM_CHECK(!c.train_file.empty(), where + ".data", "needs \"train\": the training text file");
  data.get_double("val_fraction", c.val_fraction, 0.0, 0.5);
  TFM_CHECK(c.val_fraction > 0, where + ".data.val_fraction", "must be > 0 (evaluation needs held-out text)");
  data.get_int("block_size", c.block_size, 2, 1 << 20);
  data.get_double("test_fraction", c.test_fraction, 0.01, 0.9);
  data.get_string("retrieval_db", c.retrieval_db);
  TFM_CHECK(c.retrieval_db == "train" || c.retrieval_db == "train+val", data.key("retrieval_db"),
            "must be \"train\" or \"train+val\", got \"", c.retrieval_db, "\"");
  TFM_CHECK(c.task == TaskKind::lm || !data.has("retrieval_db"), data.key("retrieval_db"), "applies to task \"lm\" only");
  data.get_int("max_length", c.max_length, 2, 1 << 20);
  if (data.has("fusion")) {
    TFM_CHECK(c.task == TaskKind::seq2seq, data.key("fusion"), "applies to task \"seq2seq\" only");
    const Section f(data.at("fusion"), data.key("fusion"), {"encoder", "passages", "passage", "template", "k"});
    TrainConfig::FusionConfig fc;
    f.get_string("encoder", fc.encoder);
    TFM_CHECK(!fc.encoder.empty(), f.key("encoder"), "is required: the sentence encoder's model directory that finds the passages");
    f.get_string("passages", fc.passages);
    TFM_CHECK(fc.passages.empty() || !f.has("passage"), f.key("passage"),
              "renders the training pairs as passages; with \"passages\" (a corpus file) it has nothing to render");
    f.get_string("passage", fc.passage_template);
    f.get_string("template", fc.part_template);
    f.get_int("k", fc.k, 1, 64);
    c.fusion = fc;
  }
  data.get_bool("header", c.header);
  data.get_int("test_size", c.test_size, 0);
  data.get_string("positive_label", c.positive_label);
  data.get_string("train_labels", c.train_labels_file);
  data.get_string("test", c.test_file);
  data.get_string("test_labels", c.test_labels_file);
  const bool image_task = c.task == TaskKind::image_classifier, speech_task = c.task == TaskKind::speech;
  for (const char* k : {"train_labels", "test_labels", "preprocessor", "augment"})
    TFM_CHECK(image_task || !data.has(k), data.key(k), "applies to task \"image_classifier\" only");
  TFM_CHECK(image_task || speech_task || !data.has("test"), data.key("test"), "applies to tasks \"image_classifier\" and \"speech\"");
  for (const char* k : {"chunk_length", "spec_augment", "timestamps_fraction", "hop_length", "pack_fraction"})
    TFM_CHECK(speech_task || !data.has(k), data.key(k), "applies to task \"speech\" only");
  data.get_double("chunk_length", c.chunk_length, 1.0, 30.0);
  data.get_double("timestamps_fraction", c.timestamps_fraction, 0.0, 1.0);
  data.get_int("hop_length", c.hop_length, 1, 400);  // at most n_fft: no sample left unread
  data.get_double("pack_fraction", c.pack_fraction, 0.0, 1.0);
  if (data.has("spec_augment")) {
    const Section a(data.at("spec_augment"), data.key("spec_augment"), {"time_masks", "time_width", "freq_masks", "freq_width"});
    a.get_int("time_masks", c.spec_time_masks, 0, 100);
    a.get_int("time_width", c.spec_time_width, 0, 3000);
    a.get_int("freq_masks", c.spec_freq_masks, 0, 100);
    a.get_int("freq_width", c.spec_freq_width, 0, 1024);
  }
  if (data.has("preprocessor")) {
    TFM_CHECK(data.at("preprocessor").is_object(), data.key("preprocessor"), "must be an object (preprocessor_config.json's keys)");
    c.preprocessor_json = data.at("preprocessor").dump();
  }
  ImageProcessor::from_json(c.preprocessor_json, data.key("preprocessor"));  // every key checked now, before any work
  if (data.has("augment")) {
    const Section a(data.at("augment"), data.key("augment"), {"crop_padding", "horizontal_flip", "random_erasing"});
    a.get_int("crop_padding", c.augment_crop_padding, 0, 1 << 12);
    a.get_bool("horizontal_flip", c.augment_horizontal_flip);
    a.get_double("random_erasing", c.augment_random_erasing, 0.0, 1.0);
  }
  if (data.has("labels")) {
    const json& l = data.at("labels");
    TFM_CHECK(l.is_array() && l.size() >= 2, data.key("labels"), "must be a list of at least two label names");
    for (const auto& s : l) {
      TFM_CHECK(s.is_string(), data.key("labels"), "entries must be strings, got ", s.dump());
      c.labels.push_back(s.get<std::string>());
    }
  }

  const Section o(section(root, "optimizer"), where + ".optimizer",
                  {"name", "lr", "beta1", "beta2", "eps", "weight_decay", "momentum", "nesterov", "no_decay"});
  std::string oname = "adamw";
  o.get_string("name", oname, {"adamw", "sgd"});
  c.optimizer.kind = oname == "sgd" ? OptimizerKind::sgd : OptimizerKind::adamw;
  o.get_double("lr", c.optimizer.lr, 0.0, 10.0);
  o.get_double("beta1", c.optimizer.beta1, 0.0, 0.999999);
  o.get_double("beta2", c.optimizer.beta2, 0.0, 0.999999999);
  o.get_double("eps", c.optimizer.eps, 0.0, 1.0);
  o.get_double("weight_decay", c.optimizer.weight_decay, 0.0, 10.0);
  o.get_double("momentum", c.optimizer.momentum, 0.0, 0.999999);
  o.get_bool("nesterov", c.optimizer.nesterov);
  if (o.has("no_decay")) {
    const json& nd = o.at("no_decay");
    TFM_CHECK(nd.is_array(), o.key("no_decay"), "must be a list of name substrings");
    c.optimizer.no_decay.clear();
    for (const auto& s : nd) {
      TFM_CHECK(s.is_string(), o.key("no_decay"), "entries must be strings, got ", s.dump());
      c.optimizer.no_decay.push_back(s.get<std::string>());
    }
  }

  const Section s(section(root, "schedule"), where + ".schedule", {"name", "warmup_steps", "min_lr_ratio"});
  std::string sname = "cosine";
  s.get_string("name", sname, {"constant", "cosine", "inverse_sqrt"});
  c.schedule.kind = sname == "constant" ? ScheduleKind::constant
                    : sname == "cosine" ? ScheduleKind::cosine : ScheduleKind::inverse_sqrt;
  s.get_int("warmup_steps", c.schedule.warmup_steps, 0);
  s.get_double("min_lr_ratio", c.schedule.min_lr_ratio, 0.0, 1.0);

  const Section t(section(root, "training"), where + ".training",
                  {"batch_size", "grad_accum", "max_steps", "clip_grad_norm", "label_smoothing",
                   "checkpoint_activations", "gradient_noise", "gradient_noise_gamma", "precision", "ctc_weight"});
  t.get_int("batch_size", c.batch_size, 1);
  t.get_int("grad_accum", c.grad_accum, 1);
  t.get_int("max_steps", c.max_steps, 1);
  t.get_double("clip_grad_norm", c.clip_grad_norm, 0.0, 1e9);
  t.get_double("label_smoothing", c.label_smoothing, 0.0, 0.999);
  t.get_double("ctc_weight", c.ctc_weight, 0.0, 1.0);
  t.get_bool("checkpoint_activations", c.checkpoint_activations);
  std::string precision = "fp32";
  t.get_string("precision", precision, {"fp32", "bf16", "auto"});
  c.precision = training_precision(precision);
  t.get_double("gradient_noise", c.gradient_noise, 0.0, 100.0);
  t.get_double("gradient_noise_gamma", c.gradient_noise_gamma, 0.0, 10.0);

  const Section dp(section(root, "distributed"), where + ".distributed", {"bucket_mb", "overlap", "zero_optimizer", "bit_exact",
                                                                                    "tensor_parallel", "pipeline_parallel",
                                                                                    "pipeline_schedule", "pipeline_balance"});
  dp.get_bool("overlap", c.overlap_grad_sync);
  dp.get_double("bucket_mb", c.bucket_mb, 0.001, 65536.0);
  dp.get_bool("zero_optimizer", c.zero_optimizer);
  dp.get_bool("bit_exact", c.bit_exact);
  dp.get_int("tensor_parallel", c.tensor_parallel, 1, 4096);
  dp.get_int("pipeline_parallel", c.pipeline_parallel, 1, 4096);
  dp.get_string("pipeline_schedule", c.pipeline_schedule, {"1f1b", "gpipe"});
  dp.get_string("pipeline_balance", c.pipeline_balance, {"memory", "even"});

  const Section e(section(root, "eval"), where + ".eval", {"every", "batches", "log_every", "bleu_examples", "beam", "bleu_tokenize",
                                                            "wer_examples", "ctc_weight"});
  e.get_int("wer_examples", c.wer_examples, 0);
  e.get_double("ctc_weight", c.eval_ctc_weight, 0.0, 1.0);
  TFM_CHECK(c.eval_ctc_weight == 0.0 || c.ctc_weight > 0.0, e.key("ctc_weight"),
            "decodes with the CTC head, which only training.ctc_weight > 0 trains");
  e.get_int("every", c.eval_every, 1);
  e.get_int("batches", c.eval_batches, 1);
  e.get_int("log_every", c.log_every, 1);
  e.get_int("bleu_examples", c.bleu_examples, 0);
  e.get_int("beam", c.bleu_beam, 1);
  e.get_string("bleu_tokenize", c.bleu_tokenize, {"auto", "13a", "intl", "zh", "char", "none"});
  // The CTC head reads the whole encoder output and the whole token embedding, which model
  // parallelism splits between ranks.
  TFM_CHECK(c.ctc_weight == 0.0 || c.task == TaskKind::speech, t.key("ctc_weight"), "applies to task \"speech\" only");
  TFM_CHECK(c.ctc_weight == 0.0 || (c.tensor_parallel == 1 && c.pipeline_parallel == 1), t.key("ctc_weight"),
            "is not supported with tensor or pipeline parallelism (data parallelism is)");
  const Section k(section(root, "checkpoint"), where + ".checkpoint", {"every"});
  k.get_int("every", c.checkpoint_every, 0);
  const Section sm(section(root, "sample"), where + ".sample", {"prompt", "tokens", "temperature"});
  sm.get_string("prompt", c.sample_prompt);
  sm.get_int("tokens", c.sample_tokens, 0);
  sm.get_double("temperature", c.sample_temperature, 0.0, 100.0);
  return c;
}

namespace {

// A relative data or tokenizer path that is not found from the working directory is taken
// from the config's folder when it is there (a config shipped beside its data runs from
// anywhere); when neither exists it stays as written and the error names both places.
std::string beside_config(const std::string& path, const std::string& config) {
  namespace fs = std::filesystem;
  if (path.empty() || fs::exists(path) || fs::path(path).is_absolute()) return path;
  const fs::path alt = fs::path(config).parent_path() / path;
  return fs::exists(alt) ? alt.string() : path;
}

}  // namespace

TrainConfig load_train_config(const std::string& path) {
  TrainConfig c = parse_train_config(read_file(path), path);
  c.train_file = beside_config(c.train_file, path);
  c.train_labels_file = beside_config(c.train_labels_file, path);
  c.test_file = beside_config(c.test_file, path);
  c.test_labels_file = beside_config(c.test_labels_file, path);
  c.tokenizer_path = beside_config(c.tokenizer_path, path);
  return c;
}

}  // namespace tfm
