// Knowledge distillation in `tfm train` (train.h DistillConfig, docs/training.md): the
// frozen teacher, the training-only hidden-state projections and the mixed loss.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tfm/model.h"
#include "tfm/model_dir.h"
#include "tfm/train.h"

namespace tfm::train_detail {

// The soft-target term (Hinton et al. 2015): T^2 * the mean over the rows where mask is 1 of
// KL(softmax(teacher/T) || softmax(student/T)). student (N, V) differentiable, teacher (N, V)
// (no gradient flows into it), mask (N) f32 of 0/1 (at least one 1). The T^2 keeps the
// gradient's scale independent of T, so alpha mixes comparable terms.
Tensor soft_target_loss(const Tensor& student, const Tensor& teacher, const Tensor& mask, double temperature);
// Layer-wise distillation (TinyBERT's hidden-state loss): the mean over the positions where
// mask is 1 and the teacher's channels of (student proj^T - teacher)^2. student (B, T, Cs),
// proj (Ct, Cs), teacher (B, T, Ct), mask (B, T) f32 of 0/1.
Tensor hidden_mse(const Tensor& student, const Tensor& proj, const Tensor& teacher, const Tensor& mask);

// alpha * soft + (1 - alpha) * hard + hidden_weight * sum(hidden): the terms alpha (or
// hidden_weight) leaves out are not computed at all (soft may be undefined when alpha is 0).
Tensor mix_distill_loss(const DistillConfig& cfg, const Tensor& soft, const Tensor& hard, const std::vector<Tensor>& hidden);

// The teacher model directory's config.json, for the memory plan (read before any weights).
ModelConfig teacher_config(const DistillConfig& cfg, const std::string& where);

class Distiller {
 public:
  // Loads the teacher and checks it against the student: the same architecture and
  // tokenizer, logits of the same width (vocabulary or labels), every hidden pair naming a
  // layer of the same stack on both sides within range. Each pair gets a projection
  // "distill.hidden.<i>.weight" (Ct, Cs): the identity when the widths agree (the loss starts
  // as a plain MSE), else Xavier-uniform from `seed`. `where` names the config in errors.
  // seq_len: the longest sequence a batch holds (block_size, max_length), which a teacher
  // with learned positions must reach.
  // Image classifiers (student_tok null) need a teacher that reads images with the same labels
  // instead of the same tokenizer; their positions are resized to any picture size.
  Distiller(const DistillConfig& cfg, const std::string& where, TaskKind task, const ModelConfig& student,
            const Tokenizer* student_tok, std::int64_t seq_len, std::uint64_t seed);
  // The projections: trained with the student, saved in the checkpoint, not in the model.
  std::map<std::string, Tensor>& parameters() { return proj_; }
  // Resume: the projections from a checkpoint's training tensors (names and shapes checked).
  void load(const std::map<std::string, Tensor>& saved, const std::string& dir);
  bool wants_hidden() const { return !cfg_.hidden.empty(); }
  // The distillation loss of one micro-batch: runs the teacher on `in` without gradients or
  // dropout, then mixes. targets: the hard loss's (-100 where not counted: padding); out and
  // hs: the student's outputs and (when wants_hidden) its captured layer outputs; hard: the
  // true labels' loss (on a DeiT student's [CLS] head). The teacher's term reads the student's
  // distillation head when it has one, else its logits.
  Tensor loss(const ModelInputs& in, const Tensor& targets, const ModelOutputs& out, const HiddenStates& hs,
              const Tensor& hard);
  // One line for the start-up summary.
  std::string summary() const;
  std::int64_t projection_parameters() const;

 private:
  DistillConfig cfg_;
  std::optional<LoadedModel> teacher_;
  std::map<std::string, Tensor> proj_;
};

}  // namespace tfm::train_detail
