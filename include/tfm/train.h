// Training: optimisers, learning-rate schedules, gradient clipping, the train config, the
// model directory (checkpoint) and the training loop that `tfm train CONFIG.json` runs.
//
//   TrainConfig cfg = load_train_config("configs/shakespeare-gpt.json");
//   TrainOptions opt;  opt.out_dir = "runs/shakespeare";
//   TrainResult r = run_training(cfg, opt);     // checkpoints, metrics.jsonl, curves.svg
//
// Determinism: a step's batch, dropout masks and update depend only on (seed, step, data
// cursor), all of which the checkpoint holds, so --resume reproduces an uninterrupted run's
// losses bit for bit at the same thread count.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tfm/load.h"
#include "tfm/model.h"
#include "tfm/model_config.h"
#include "tfm/model_dir.h"
#include "tfm/runtime.h"
#include "tfm/tensor.h"
#include "tfm/tokenizer.h"

namespace tfm {

// ---- optimisers ------------------------------------------------------------------------
enum class OptimizerKind { adamw, sgd };

struct OptimizerConfig {
  OptimizerKind kind = OptimizerKind::adamw;
  double lr = 1e-3;            // peak learning rate (the schedule scales it)
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // AdamW
  double momentum = 0.0;       // SGD (PyTorch's: buf = m*buf + g; first step buf = g)
  bool nesterov = false;       // SGD
  double weight_decay = 0.0;   // AdamW: decoupled (p -= lr*wd*p); SGD: added to the gradient
  // Parameters whose name contains one of these substrings, or whose tensor is 1-D
  // (norm scales, biases) get no weight decay. Default: the embedding tables of every family.
  std::vector<std::string> no_decay = {"embed", "wte", "wpe", "shared.weight"};
};

// True when `name` (shape `shape`) belongs to the weight-decay group.
bool decays(const OptimizerConfig& cfg, const std::string& name, const Shape& shape);

// One optimiser over a name -> parameter map. step() reads each parameter's grad() and
// updates the parameter in place (no autograd). Parameters without a gradient are skipped
// (as PyTorch does for p.grad is None) and their state is left untouched.
class Optimizer {
 public:
  explicit Optimizer(OptimizerConfig cfg);
  void step(std::map<std::string, Tensor>& params, double lr);
  std::int64_t steps_taken() const { return step_; }
  const OptimizerConfig& config() const { return cfg_; }
  // State as tensors ("exp_avg.<name>", "exp_avg_sq.<name>", "momentum.<name>") plus the
  // step count, for checkpoints; load_state checks names and shapes against params.
  std::map<std::string, Tensor> state() const;
  void load_state(const std::map<std::string, Tensor>& state, std::int64_t steps,
                  const std::map<std::string, Tensor>& params);

 private:
  OptimizerConfig cfg_;
  std::int64_t step_ = 0;
  std::map<std::string, Tensor> m_, v_;  // AdamW moments / SGD momentum buffers (m_)
};

// Global L2 norm of all gradients (accumulated in double, in name order, so it is the same
// at any thread count); when max_norm > 0 and the norm exceeds it, every gradient is scaled
// by max_norm / (norm + 1e-6) as torch.nn.utils.clip_grad_norm_ does. Returns the norm.
// With tensor parallelism, `split` names the parameters divided across the ranks: their
// squares are added over the ranks by `sum_split`; the others are whole on every rank and
// count once.
// Pipeline stages instead give `combine`, which turns this rank's squares by parameter name
// into the total (the stages add every parameter's in the whole model's order).
struct SplitParameters {
  std::function<bool(const std::string&)> split;
  std::function<double(double)> sum_split;
  std::function<double(const std::map<std::string, double>&)> combine;
};
double clip_grad_norm(std::map<std::string, Tensor>& params, double max_norm, const SplitParameters* sharded = nullptr);
// Gradient noise (Neelakantan et al. 2015): adds N(0, sigma^2) to every gradient element, with
// sigma^2 = eta / (1 + step)^gamma annealed over the 0-based optimiser step; the draws depend
// only on (seed, step) and each element's place in name order. Returns sigma.
double add_gradient_noise(std::map<std::string, Tensor>& params, double eta, double gamma, std::int64_t step,
                          std::uint64_t seed);
// Multiply every gradient by s (gradient accumulation averages micro-batches this way).
void scale_grads(std::map<std::string, Tensor>& params, float s);

// ---- learning-rate schedules -------------------------------------------------------------
enum class ScheduleKind { constant, cosine, inverse_sqrt };

struct ScheduleConfig {
  ScheduleKind kind = ScheduleKind::cosine;
  std::int64_t warmup_steps = 0;  // linear warm-up from lr/warmup to lr (all kinds)
  double min_lr_ratio = 0.1;      // cosine: floor as a fraction of lr, reached at total_steps
  // inverse_sqrt (Vaswani et al.): lr * min((s)^-0.5, s * warmup^-1.5) * sqrt(warmup), i.e.
  // peak lr at the end of warm-up then decay as 1/sqrt(step).
};
// Learning rate of optimiser step `step` (0-based) of `total_steps`.
double learning_rate(const ScheduleConfig& s, double peak_lr, std::int64_t step, std::int64_t total_steps);

// ---- train config ----------------------------------------------------------------------
enum class TaskKind { lm, classifier, seq2seq, image_classifier, speech };
const char* task_name(TaskKind k);  // "lm", "classifier", "seq2seq", "image_classifier", "speech"

// Knowledge distillation (docs/training.md): a frozen teacher runs on every training batch.
// loss = alpha * T^2 * KL(softmax(teacher/T) || softmax(student/T)) + (1 - alpha) * hard loss,
// both over the positions the hard loss counts, plus hidden_weight * the sum over `hidden`
// pairs of the MSE between the student's layer output, mapped by a learned training-only
// projection (student d_model -> teacher d_model), and the teacher's.
struct DistillLayer {
  bool encoder = false;    // "enc.N" (encoder stack) or "dec.N"; a plain N: the model's only stack
  bool stack_named = false;  // written "enc.N"/"dec.N" (needed for encoder-decoder models)
  std::int64_t index = 0;  // 0: the embeddings (the stack's input), i: the output of layer i (1-based)
  std::string name() const { return (encoder ? "enc." : "dec.") + std::to_string(index); }
};
struct DistillConfig {
  std::string teacher;      // a model directory load_model_dir reads
  double temperature = 2.0;
  double alpha = 0.5;       // weight of the teacher's term; 1 - alpha weighs the true labels' loss
  // "kind": "soft" (KL to the teacher's softened distribution) or "hard" (cross-entropy to the
  // teacher's argmax, DeiT's hard distillation). A DeiT student with its distillation head
  // learns the teacher's term on that head and the true labels on its [CLS] head.
  bool hard = false;
  std::vector<std::pair<DistillLayer, DistillLayer>> hidden;  // (student layer, teacher layer)
  double hidden_weight = 1.0;
};

struct TrainConfig {
  std::string source;               // the file it came from (for messages)
  std::string json;                 // the config text as parsed (saved with checkpoints)
  TaskKind task = TaskKind::lm;
  std::uint64_t seed = 1337;
  std::string model_json;           // the "model" object (vocab_size filled from the tokenizer)
  // Fine-tuning: start from this model directory's weights and tokenizer; "model" keys then
  // override its config (a new head: "head", "num_labels", "id2label"; dropout rates).
  std::string init_from;
  bool init_from_new_tokenizer = false;
  std::vector<std::string> init_skip;    // "init_skip": patterns of init_from tensors not loaded (a new head)  // init_from with its own "tokenizer": a new vocabulary
  std::optional<LoraConfig> lora;   // "lora": {r, alpha, dropout, target_modules}
  // "adapter": {"type": "bottleneck", "placement", "reduction_factor" | "bottleneck_size",
  // "non_linearity"} or {"type": "prefix_tuning", "num_virtual_tokens", "prefix_projection",
  // "encoder_hidden_size"} (peft.h); like lora, the base then stays frozen by default.
  std::optional<BottleneckConfig> bottleneck;
  std::optional<PrefixConfig> prefix;
  // Parameter-name patterns ('*' wildcards) that train; the rest are frozen. Default: all, or
  // with LoRA the factors and any parameter init_from did not supply (a new head).
  std::vector<std::string> trainable;
  std::optional<DistillConfig> distill;  // "distill": learn from a teacher model as well
  // tokenizer: train one on the training text, or load a tokenizer.json
  std::string tokenizer_kind = "char";  // char | word | bpe
  std::int64_t tokenizer_vocab_size = 0;
  std::string tokenizer_path;           // non-empty: load instead of training
  std::int64_t tokenizer_min_freq = 0;
  bool tokenizer_isolate_cjk = false;   // bpe: Chinese characters never merged (TokenizerTrainOptions)
  // data (lm): a text file
  std::string train_file;
  double val_fraction = 0.1;        // the last fraction of the text is held out
  std::int64_t block_size = 128;    // tokens per training sequence
  // RETRO models (model_type "retro"): the chunk database is the training split ("train"), or
  // also the held-out text ("train+val": the leak RETRO's paper warns about, for measuring it).
  std::string retrieval_db = "train";
  bool no_retrieval = false;        // train the model without its retrieval block (tfm train --no-retrieval)
  // data (seq2seq) "fusion": Fusion-in-Decoder (Izacard & Grave 2021). Each example reads the k
  // passages nearest its source, found by a sentence encoder (a model directory, as `tfm index
  // build -m` takes) in a FAISS index built before training into the model directory's
  // fusion_index/ (tfm translate searches it again); each passage is joined with the source by
  // `template` (Jinja over `prompt` and `document`) and encoded alone, and the decoder reads all
  // k encodings. The passages are `passages` (a corpus file: .txt a passage a line, or .jsonl),
  // or without it the training pairs themselves through `passage` (Jinja over `source` and
  // `target`): a translation memory, where an example never reads its own pair.
  // --no-retrieval trains the same model on the sources alone.
  struct FusionConfig {
    std::string encoder, passages;
    std::string passage_template = "{{ source }} = {{ target }}";
    std::string part_template = "question: {{ prompt }} context: {{ document.text }}";  // default_fusion_template()
    std::int64_t k = 2;
  };
  std::optional<FusionConfig> fusion;
  // data (classifier): label<TAB>text lines; (seq2seq): source<TAB>target[<TAB>...] lines
  double test_fraction = 0.2;       // a seeded split, never trained on
  std::int64_t test_size = 0;       // > 0: this many examples in the test split instead
  std::int64_t bleu_examples = 200; // seq2seq: test pairs decoded for BLEU at each eval
  std::int64_t bleu_beam = 1;       // seq2seq and speech: beam size of that decoding (1: greedy)
  std::string bleu_tokenize = "auto";  // seq2seq: sacreBLEU tokenizer for BLEU (13a, intl, zh, char,
                                       // none; auto: zh when the references are Chinese, else 13a)
  std::int64_t max_length = 128;    // tokens per example (with the leading <bos>)
  bool header = false;              // skip the first line
  std::string positive_label;       // precision/recall/F1 of this label (default: the last)
  std::vector<std::string> labels;  // classifier: the label names in class order (default: the
                                    // sorted names found in the data; a model dir's
                                    // train_config.json records them)
  // data (image_classifier): "train" is an IDX image file (Fashion-MNIST's; "train_labels" its
  // IDX labels) or a folder of class folders; "test" (+ "test_labels") the same for the test
  // split, which otherwise is a seeded test_fraction of the training images.
  std::string train_labels_file, test_file, test_labels_file;
  // "data.preprocessor": the preprocessor_config.json object the images go through (saved
  // with the model); default: rescale to [0, 1], normalise by mean 0.5 and std 0.5.
  std::string preprocessor_json = R"({"do_resize": false, "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5]})";
  // "data.augment": {"crop_padding": N, "horizontal_flip": bool} on the training images.
  std::int64_t augment_crop_padding = 0;
  bool augment_horizontal_flip = false;
  double augment_random_erasing = 0.0;  // "random_erasing": the chance an image has a rectangle erased
  // data (speech): "train" and "test" are manifests of path<TAB>transcript lines (paths
  // relative to the manifest); audio is read at 16 kHz and cut into chunk_length-second windows
  // as WhisperFeatureExtractor does. "spec_augment": {"time_masks", "time_width", "freq_masks",
  // "freq_width"}; timestamps_fraction of the training clips are taught with timestamps.
  // hop_length: samples between feature frames (Whisper's 160: 100 frames a second; 320 halves
  // the encoder's positions). pack_fraction: of the training windows, those filled with more
  // clips behind the first where they fit.
  double chunk_length = 30.0;
  std::int64_t hop_length = 160;
  double pack_fraction = 0.0;
  std::int64_t spec_time_masks = 0, spec_time_width = 0, spec_freq_masks = 0, spec_freq_width = 0;
  double timestamps_fraction = 0.5;
  std::int64_t wer_examples = 200;  // speech: test clips decoded for WER at each eval (eval.beam
                                    // beams, 1: greedy)
  double eval_ctc_weight = 0;       // speech: joint CTC/attention decoding of those clips
                                    // (eval.ctc_weight; TranscribeOptions::ctc_weight)
  // optimisation
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  std::int64_t batch_size = 32;
  std::int64_t grad_accum = 1;      // micro-batches per optimiser step
  std::int64_t max_steps = 1000;
  double clip_grad_norm = 1.0;      // 0: no clipping
  double label_smoothing = 0.0;
  // speech: the weight w of a CTC loss on the encoder's states, mixed as (1 - w) · decoder loss +
  // w · CTC (joint CTC/attention training; docs/speech.md). 0: the decoder's loss alone.
  double ctc_weight = 0.0;
  double gradient_noise = 0.0;         // eta of add_gradient_noise (0: off); added before clipping
  double gradient_noise_gamma = 0.55;  // its annealing exponent
  bool checkpoint_activations = false;  // recompute each layer in backward (Model::set_checkpoint_activations)
  Precision precision = Precision::fp32;  // bf16: mixed precision (matmuls/attention in bf16, fp32 rest)
  // data parallelism (mpirun -np N tfm train ...; docs/distributed.md). Each rank takes 1/N
  // of every step's micro-batches (whole ones when N divides grad_accum, else split rows).
  double bucket_mb = 4.0;           // gradients all-reduced in buckets of about this size
  bool overlap_grad_sync = true;    // start a bucket's all-reduce during the backward pass
  bool zero_optimizer = false;      // ZeRO stage 1: each rank keeps the optimizer state of 1/N of the parameters
  bool bit_exact = false;           // fixed-order (tree) gradient sums: bit-identical for any power-of-two N
  // tensor parallelism (docs/distributed.md): each model is split over this many consecutive
  // ranks (Megatron-LM's layout); the N / tensor_parallel replicas train data-parallel.
  std::int64_t tensor_parallel = 1;
  // pipeline parallelism: the layers split into this many stages, one per rank (decoder-only
  // language models), micro-batches scheduled "1f1b" or "gpipe".
  std::int64_t pipeline_parallel = 1;
  std::string pipeline_schedule = "1f1b";
  // "memory": the stages' layers balanced by the memory planner (plan_pipeline_stages);
  // "even": n_layers / P each, the first stages one more.
  std::string pipeline_balance = "memory";
  // evaluation, logging, checkpoints
  std::int64_t eval_every = 100;
  std::int64_t eval_batches = 20;
  std::int64_t log_every = 10;
  std::int64_t checkpoint_every = 0;  // 0: at each eval
  // the sample printed at the end
  std::string sample_prompt = "\n";
  std::int64_t sample_tokens = 200;
  double sample_temperature = 0.8;
};

// A training precision by name: "fp32", "bf16", or "auto": bf16 where this CPU multiplies bf16
// in hardware (bf16_path_description() not emulated), else fp32, which is faster than
// emulated bf16 (Fashion-MNIST's ViT under TFM_ISA=avx2: 47,951 against 40,573 tokens/s).
Precision training_precision(const std::string& name);

// Parse a train config (JSON text; `where` names it in errors). Unknown keys are errors that
// list the allowed ones; every value is range-checked.
TrainConfig parse_train_config(const std::string& json_text, const std::string& where);
TrainConfig load_train_config(const std::string& path);

// ---- model directory -------------------------------------------------------------------
// DIR/config.json, DIR/model.safetensors, DIR/tokenizer.json (the model, for inference), and
// for resuming DIR/checkpoint/ holding the same plus optimizer.safetensors and
// train_state.json. The checkpoint is written into checkpoint.tmp/ and swapped in by renames,
// so a killed run always leaves a complete one (checkpoint.cpp explains the fallback).
struct TrainState {
  std::int64_t step = 0;          // optimiser steps done
  std::uint64_t seed = 0;
  std::int64_t data_cursor = 0;   // training sequences consumed so far
  std::int64_t threads = 0;       // thread count of the run (resume warns on a change)
  std::string train_config_json;  // the config the run started with
  // Training-only tensors that are no part of the model (distillation's hidden-state
  // projections): checkpoint/training_tensors.safetensors, never in the inference copy.
  std::map<std::string, Tensor> training_tensors;
  // More files of the model directory, by name (an image model's preprocessor_config.json).
  std::map<std::string, std::string> model_files;
};

void save_checkpoint(const std::string& dir, const Model& model, const Tokenizer& tok,
                     const Optimizer& opt, const TrainState& state);
struct LoadedCheckpoint {
  LoadedModel model;
  TrainState state;
  std::map<std::string, Tensor> optimizer_state;
  std::int64_t optimizer_steps = 0;
};
LoadedCheckpoint load_checkpoint(const std::string& dir);

// ---- the loop ----------------------------------------------------------------------------
struct TrainOptions {
  std::string out_dir = "runs/train";
  std::int64_t max_steps = -1;      // > 0 overrides the config's
  std::string resume_dir;           // continue from this checkpoint directory
  bool quiet = false;               // no progress output (tests)
  bool print_sample = true;
  // > 0: refuse to start (tfm::Error with the plan's breakdown) when the training memory plan
  // (weights, gradients, optimiser state, activations; memory_plan.h) exceeds this many bytes.
  std::int64_t max_memory_bytes = 0;
  // Called after every optimiser step with (step, loss); returning false stops the run
  // there with a checkpoint (tests use it to simulate an interruption).
  std::function<bool(std::int64_t, double)> on_step;
};

struct TrainResult {
  std::vector<double> losses;       // training loss of each step run in this call
  std::int64_t final_step = 0;
  double val_loss = 0;              // last evaluation
  std::map<std::string, double> val_metrics;  // last evaluation: loss, perplexity / accuracy, f1, ...
  bool interrupted = false;
  std::string sample;
};

TrainResult run_training(const TrainConfig& cfg, const TrainOptions& opt);

// ---- evaluation of a model directory (tfm eval) ------------------------------------------
// The task comes from the model (decoder-only LM, encoder-only classifier, encoder-decoder
// seq2seq); DIR/train_config.json (written with every checkpoint) supplies the data, the
// seeded split and the batch/context sizes. Scoring is the trainer's evaluate().
struct EvalOptions {
  std::string data_file;            // empty: the held-out split of DIR/train_config.json
  bool header = false;              // data_file's first line is a header (label/pair files)
  std::int64_t batch_size = 0;      // 0: the training config's
  std::int64_t context = 0;         // LM: window length in tokens (0: the training block_size)
  std::int64_t bleu_examples = -1;  // seq2seq: pairs decoded for BLEU (-1: all)
  std::int64_t beam = 0;            // seq2seq: beam size for BLEU (0: the training config's)
  std::string adapter_dir = "";     // an adapter to attach (adapter.h: LoRA, bottleneck, prefix), or empty
  std::string weight_type{}, weight_recipe{};  // --dtype / --recipe: weights converted at load (quantize.h)
  std::string bleu_tokenize{};      // seq2seq: sacreBLEU tokenizer or "auto" (empty: the training config's)
  // A CLIP model is scored zero-shot on --data (a folder of class folders): each class name put
  // into this text where "{}" stands (CLIP's paper prompt by default).
  std::string zero_shot_template = "a photo of a {}.";
  std::int64_t max_memory_bytes = 0;  // > 0: refuse (before loading weights) when the memory plan for
                                      // the eval batch (plan_memory: batch x context) exceeds it
  // Model parallelism (mpirun; tfm/load.h): only these LoadOptions fields are used — tp_* for a
  // tensor-parallel shard, pp_* for a pipeline stage. Every rank then evaluates in lockstep and
  // gets the same report.
  LoadOptions parallel{};
};
struct EvalReport {
  TaskKind task = TaskKind::lm;
  std::string data;                 // what was scored, in words
  std::int64_t examples = 0;        // LM: tokens scored; else examples (pairs)
  std::map<std::string, double> metrics;  // loss (+ perplexity | accuracy, precision, recall, f1 | bleu, chrf)
  std::string positive_label;       // classifier: the class precision/recall/F1 are of
  std::map<std::string, std::string> signatures;  // seq2seq: sacreBLEU signature of "bleu" and "chrf"
  std::vector<std::string> hypotheses;  // seq2seq: the decoded translations that were scored, in order
  std::int64_t beam = 0;            // seq2seq: the beam size they were decoded with (1: greedy)
  std::vector<std::vector<std::int64_t>> confusion;  // classifiers: [true class][predicted class] counts
};
EvalReport evaluate_model_dir(const std::string& dir, const EvalOptions& opt);

}  // namespace tfm
