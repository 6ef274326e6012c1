// Knowledge distillation (distill.h): teacher checks, projections and the mixed loss.
#include "train/distill.h"

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "tfm/autograd.h"
#include "tfm/error.h"
#include "tfm/ops.h"

namespace tfm::train_detail {
namespace {

namespace fs = std::filesystem;

std::int64_t stack_layers(const ModelConfig& c, bool encoder) {
  if (encoder || c.architecture == Architecture::decoder_only) return c.n_layers;
  return c.n_decoder_layers > 0 ? c.n_decoder_layers : c.n_layers;
}

// Which stack a pair side names: "enc."/"dec." as written, a plain number the only one.
bool resolve_stack(const DistillLayer& l, const ModelConfig& c, const std::string& at) {
  const Architecture a = c.architecture;
  if (!l.stack_named) {
    TFM_CHECK(a != Architecture::encoder_decoder, at, "an encoder-decoder model has two stacks: write \"enc.",
              l.index, "\" or \"dec.", l.index, "\"");
    return a == Architecture::encoder_only;
  }
  TFM_CHECK(!l.encoder || a != Architecture::decoder_only, at, "names ", l.name(), " but a decoder-only model has no encoder");
  TFM_CHECK(l.encoder || a != Architecture::encoder_only, at, "names ", l.name(), " but an encoder-only model has no decoder");
  return l.encoder;
}

// (B, T) 0/1: positions t < valid_lens[b] (all when valid_lens is undefined).
Tensor length_mask(const Tensor& valid_lens, std::int64_t B, std::int64_t T) {
  std::vector<float> m(static_cast<std::size_t>(B * T), 1.0f);
  if (valid_lens.defined()) {
    const auto lens = valid_lens.to_ints();
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t t = lens[static_cast<std::size_t>(b)]; t < T; ++t) m[static_cast<std::size_t>(b * T + t)] = 0.0f;
  }
  return Tensor::from_floats(m, {B, T});
}

// targets' shape, 0 where the hard loss ignores the target (-100), else 1.
Tensor target_mask(const Tensor& targets) {
  std::vector<float> m;
  for (std::int64_t t : targets.to_ints()) m.push_back(t == -100 ? 0.0f : 1.0f);
  return Tensor::from_floats(m, targets.shape());
}

// The teacher's argmax at every counted position (N), -100 where targets are -100: the labels
// of hard distillation (DeiT's y_t).
Tensor hard_targets(const Tensor& teacher_logits, const Tensor& targets) {
  std::vector<std::int64_t> labels = argmax(teacher_logits, -1).to_ints();
  const std::vector<std::int64_t> t = targets.to_ints();
  TFM_CHECK(labels.size() == t.size(), "distill", "the teacher gives ", labels.size(), " predictions for ", t.size(), " targets");
  for (std::size_t i = 0; i < t.size(); ++i)
    if (t[i] == -100) labels[i] = -100;
  return Tensor::from_ints(labels, {static_cast<std::int64_t>(labels.size())});
}

double mask_count(const Tensor& mask) {
  double n = 0;
  for (float v : mask.to_floats()) n += v;
  return n;
}

std::string mib(std::int64_t n) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f MiB", static_cast<double>(n) / (1024.0 * 1024.0));
  return b;
}

}  // namespace

Tensor soft_target_loss(const Tensor& student, const Tensor& teacher, const Tensor& mask, double temperature) {
  TFM_CHECK(student.dim() == 2 && teacher.shape() == student.shape() && mask.dim() == 1 && mask.size(0) == student.size(0),
            "distill", "soft targets need student (N, V), teacher (N, V) and mask (N), got ", student.str(), ", ",
            teacher.str(), ", ", mask.str());
  const double n = mask_count(mask);
  TFM_CHECK(n > 0, "distill", "the batch has no position to distil");
  const auto inv_t = static_cast<float>(1.0 / temperature);
  // KL(p || q) = sum_v p (log p - log q). The teacher's side is a constant: the weights
  // w = p * mask * T^2 / n and C = sum w log p, so the loss is C - sum(w * log q).
  Tensor w;
  double c = 0;
  {
    NoGradGuard no_grad;
    const Tensor log_p = log_softmax(mul_scalar(teacher, inv_t));
    const Tensor scale = mul_scalar(reshape(mask, {-1, 1}), static_cast<float>(temperature * temperature / n));
    w = mul(exp(log_p), scale);  // (N, V)
    c = sum(mul(w, log_p)).item();
  }
  const Tensor log_q = log_softmax(mul_scalar(student, inv_t));
  return add_scalar(neg(sum(mul(w, log_q))), static_cast<float>(c));
}

Tensor hidden_mse(const Tensor& student, const Tensor& proj, const Tensor& teacher, const Tensor& mask) {
  TFM_CHECK(student.dim() == 3 && proj.dim() == 2 && proj.size(1) == student.size(2) && teacher.dim() == 3 &&
                teacher.size(0) == student.size(0) && teacher.size(1) == student.size(1) && teacher.size(2) == proj.size(0) &&
                mask.dim() == 2 && mask.size(0) == student.size(0) && mask.size(1) == student.size(1),
            "distill", "hidden states need student (B, T, Cs), projection (Ct, Cs), teacher (B, T, Ct), mask (B, T), got ",
            student.str(), ", ", proj.str(), ", ", teacher.str(), ", ", mask.str());
  const double n = mask_count(mask);
  TFM_CHECK(n > 0, "distill", "the batch has no position to distil");
  const Tensor d = sub(linear(student, proj), teacher);  // (B, T, Ct)
  const Tensor per_position = sum(mul(d, d), -1);        // (B, T)
  return mul_scalar(sum(mul(per_position, mask)), static_cast<float>(1.0 / (n * static_cast<double>(teacher.size(2)))));
}

ModelConfig teacher_config(const DistillConfig& cfg, const std::string& where) {
  const std::string key = where + ".distill.teacher";
  TFM_CHECK(fs::is_directory(cfg.teacher), key, "'", cfg.teacher, "' is not a directory (the teacher's model directory)");
  const fs::path config = fs::path(cfg.teacher) / "config.json";
  TFM_CHECK(fs::is_regular_file(config), key, "'", cfg.teacher, "' holds no config.json: not a model directory");
  return load_model_config(config.string());
}

Distiller::Distiller(const DistillConfig& cfg, const std::string& where, TaskKind task, const ModelConfig& student,
                     const Tokenizer* student_tok, std::int64_t seq_len, std::uint64_t seed)
    : cfg_(cfg) {
  const std::string key = where + ".distill.teacher";
  teacher_config(cfg, where);  // the directory checks, with their messages
  teacher_.emplace(load_model_dir(cfg.teacher));
  const ModelConfig& t = teacher_->config;
  TFM_CHECK(t.architecture == student.architecture, key, "the teacher '", cfg.teacher, "' is ", to_string(t.architecture),
            ", the student ", to_string(student.architecture), ": both must be the same kind of model");
  TFM_CHECK(t.head == student.head, key, "the teacher '", cfg.teacher, "' has a ", to_string(t.head), " head, the student a ",
            to_string(student.head), " head");
  if (task == TaskKind::image_classifier) {
    TFM_CHECK(t.reads_images(), key, "the teacher '", cfg.teacher, "' reads text; an image classifier needs one that reads images");
    TFM_CHECK(cfg.hidden.empty(), where + ".distill.hidden", "is for text models (image models' tokens need not line up)");
  } else {
    TFM_CHECK(student_tok != nullptr && teacher_->tokenizer.to_json() == student_tok->to_json(), key,
              "the teacher's tokenizer (", cfg.teacher, "/tokenizer.json, vocab ", teacher_->tokenizer.vocab_size(),
              ") differs from the student's (vocab ", student_tok ? student_tok->vocab_size() : 0,
              "): distillation compares the two token by token, so both need the same one");
  }
  if (task == TaskKind::classifier || task == TaskKind::image_classifier) {
    TFM_CHECK(t.num_labels == student.num_labels, key, "the teacher '", cfg.teacher, "' has ", t.num_labels,
              " labels, the student ", student.num_labels);
    TFM_CHECK(t.id2label.empty() || student.id2label.empty() || t.id2label == student.id2label, key, "the teacher '",
              cfg.teacher, "' orders its labels differently from the data (its id2label against the student's)");
  } else {
    TFM_CHECK(t.vocab_size == student.vocab_size, key, "the teacher '", cfg.teacher, "' has vocab_size ", t.vocab_size,
              ", the student ", student.vocab_size, ": the logits must have the same width");
  }
  TFM_CHECK(task == TaskKind::image_classifier || t.position != PositionKind::learned || t.max_positions >= seq_len, key, "the teacher '", cfg.teacher,
            "' has max_positions ", t.max_positions, ", shorter than the training sequences (", seq_len, " tokens)");
  for (auto& [name, p] : teacher_->model.parameters()) p.requires_grad_(false);
  teacher_->model.set_training(false);
  for (std::size_t i = 0; i < cfg_.hidden.size(); ++i) {
    auto& [s, te] = cfg_.hidden[i];
    const std::string at = where + ".distill.hidden[" + std::to_string(i) + "]";
    s.encoder = resolve_stack(s, student, at + "[0]");
    te.encoder = resolve_stack(te, t, at + "[1]");
    s.stack_named = te.stack_named = true;
    TFM_CHECK(s.encoder == te.encoder, at, "pairs student ", s.name(), " with teacher ", te.name(),
              ": both sides must be in the same stack (their positions are different tokens otherwise)");
    const std::int64_t ns = stack_layers(student, s.encoder), nt = stack_layers(t, te.encoder);
    TFM_CHECK(s.index <= ns, at, "student layer ", s.name(), " is out of range: its ", s.encoder ? "encoder" : "decoder",
              " has ", ns, " layers (0 = the embeddings .. ", ns, ")");
    TFM_CHECK(te.index <= nt, at, "teacher layer ", te.name(), " is out of range: its ", te.encoder ? "encoder" : "decoder",
              " has ", nt, " layers (0 = the embeddings .. ", nt, ")");
    const std::int64_t cs = student.d_model, ct = t.d_model;
    Tensor w;
    if (cs == ct) {
      std::vector<float> eye(static_cast<std::size_t>(cs * cs), 0.0f);
      for (std::int64_t k = 0; k < cs; ++k) eye[static_cast<std::size_t>(k * cs + k)] = 1.0f;
      w = Tensor::from_floats(eye, {ct, cs});
    } else {
      const auto a = static_cast<float>(std::sqrt(6.0 / static_cast<double>(cs + ct)));
      w = Tensor::uniform({ct, cs}, seed ^ (0xD157111ull + i), -a, a);
    }
    proj_["distill.hidden." + std::to_string(i) + ".weight"] = w.requires_grad_();
  }
}

void Distiller::load(const std::map<std::string, Tensor>& saved, const std::string& dir) {
  NoGradGuard no_grad;
  for (auto& [name, p] : proj_) {
    const auto it = saved.find(name);
    TFM_CHECK(it != saved.end(), "resume", dir, " holds no distillation projection '", name,
              "' (checkpoint/training_tensors.safetensors): was it trained with the same distill.hidden?");
    TFM_CHECK(it->second.shape() == p.shape(), "resume", dir, ": projection '", name, "' is ", it->second.str(),
              ", the config makes ", p.str());
    p.copy_(it->second);
  }
}

std::int64_t Distiller::projection_parameters() const {
  std::int64_t n = 0;
  for (const auto& [name, p] : proj_) n += p.numel();
  return n;
}

std::string Distiller::summary() const {
  const ModelConfig& t = teacher_->config;
  const std::int64_t n = teacher_->model.parameter_count();
  char buf[256];
  if (t.architecture == Architecture::encoder_decoder)
    std::snprintf(buf, sizeof buf, "%lld parameters, %lld+%lld layers", static_cast<long long>(n),
                  static_cast<long long>(t.n_layers), static_cast<long long>(stack_layers(t, false)));
  else
    std::snprintf(buf, sizeof buf, "%lld parameters, %lld layers", static_cast<long long>(n), static_cast<long long>(t.n_layers));
  std::string s = "distill: teacher ";
  s += cfg_.teacher;
  s += " (";
  s += buf;
  if (cfg_.hard)
    std::snprintf(buf, sizeof buf, ", d_model %lld, frozen, weights %s), hard labels, alpha %g",
                  static_cast<long long>(t.d_model), mib(n * 4).c_str(), cfg_.alpha);
  else
    std::snprintf(buf, sizeof buf, ", d_model %lld, frozen, weights %s), T %g, alpha %g", static_cast<long long>(t.d_model),
                  mib(n * 4).c_str(), cfg_.temperature, cfg_.alpha);
  s += buf;
  if (cfg_.hidden.empty()) return s;
  s += "; hidden";
  for (const auto& [st, te] : cfg_.hidden) {
    s += ' ';
    s += st.name();
    s += "->";
    s += te.name();
  }
  std::snprintf(buf, sizeof buf, " (weight %g, %lld projection parameters, training-only)", cfg_.hidden_weight,
                static_cast<long long>(projection_parameters()));
  return s + buf;
}

Tensor Distiller::loss(const ModelInputs& in, const Tensor& targets, const ModelOutputs& out, const HiddenStates& hs,
                       const Tensor& hard) {
  HiddenStates th;
  Tensor teacher_logits;
  {
    NoGradGuard no_grad;
    Model& tm = teacher_->model;
    if (wants_hidden()) tm.set_hidden_capture(&th);
    try {
      teacher_logits = tm.forward(in).logits;
    } catch (...) {
      tm.set_hidden_capture(nullptr);
      throw;
    }
    tm.set_hidden_capture(nullptr);
  }
  Tensor soft;  // the teacher's term
  const Tensor& student = out.distillation_logits.defined() ? out.distillation_logits : out.logits;
  if (cfg_.alpha > 0 && cfg_.hard) {
    soft = cross_entropy(reshape(student, {-1, student.size(-1)}), hard_targets(teacher_logits, targets), -100);
  } else if (cfg_.alpha > 0) {
    const std::int64_t V = student.size(-1);
    soft = soft_target_loss(reshape(student, {-1, V}), reshape(teacher_logits, {-1, V}),
                            reshape(target_mask(targets), {-1}), cfg_.temperature);
  }
  std::vector<Tensor> hidden;
  for (std::size_t i = 0; i < cfg_.hidden.size() && cfg_.hidden_weight > 0; ++i) {
    const auto& [s, te] = cfg_.hidden[i];
    const auto& sv = s.encoder ? hs.encoder : hs.decoder;
    const auto& tv = te.encoder ? th.encoder : th.decoder;
    TFM_CHECK(static_cast<std::size_t>(s.index) < sv.size() && static_cast<std::size_t>(te.index) < tv.size(), "distill",
              "hidden states of ", s.name(), " / ", te.name(), " were not captured");
    const Tensor& hs_i = sv[static_cast<std::size_t>(s.index)];
    // Padding is left out: source positions past valid_lens, target positions the hard
    // loss ignores (the decoder's inputs line up with its targets).
    const Tensor mask = s.encoder ? length_mask(in.valid_lens, hs_i.size(0), hs_i.size(1)) : target_mask(targets);
    hidden.push_back(hidden_mse(hs_i, proj_.at("distill.hidden." + std::to_string(i) + ".weight"),
                                tv[static_cast<std::size_t>(te.index)], mask));
  }
  return mix_distill_loss(cfg_, soft, hard, hidden);
}

Tensor mix_distill_loss(const DistillConfig& cfg, const Tensor& soft, const Tensor& hard, const std::vector<Tensor>& hidden) {
  Tensor total;
  auto plus = [&](const Tensor& t) { total = total.defined() ? add(total, t) : t; };
  if (cfg.alpha > 0) plus(mul_scalar(soft, static_cast<float>(cfg.alpha)));
  if (cfg.alpha < 1) plus(mul_scalar(hard, static_cast<float>(1.0 - cfg.alpha)));
  if (cfg.hidden_weight > 0)
    for (const Tensor& h : hidden) plus(mul_scalar(h, static_cast<float>(cfg.hidden_weight)));
  return total;
}

}  // namespace tfm::train_detail
