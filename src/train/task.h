// Per-task pieces of the training loop: data and tokenizer setup, the loss of one
// micro-batch, and evaluation. The loop itself (trainer.cpp) is the same for every task.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "tfm/chunk_database.h"
#include "tfm/train.h"
#include "train/train_internal.h"

namespace tfm::train_detail {

struct TaskData {
  TaskKind kind = TaskKind::lm;
  std::optional<LmData> lm;
  std::optional<ClsData> cls;
  std::optional<Seq2SeqData> s2s;
  std::optional<ImageData> images;
  std::optional<SpeechData> speech;
  std::optional<AudioFeatureExtractor> audio;   // speech: the front end (saved as preprocessor_config.json)
  WhisperTokens special;                        // speech: the vocabulary's special tokens
  std::map<std::string, std::string> model_files;  // written into the model directory (speech: its configs)
  std::vector<std::string> label_names;
  std::vector<std::string> test_refs;  // seq2seq: raw target text of the test pairs (BLEU references)
  const Tokenizer* tok = nullptr;      // seq2seq: decodes the greedy outputs
  std::int64_t positive = 0;
  // A CLIP model scored zero-shot (tfm eval): each class's label text, in class order; the
  // logits are its similarities to them (evaluate reads the tokens through tok).
  std::vector<std::string> zero_shot_texts;
  // RETRO: the chunk database (training split, or with the held-out text: retrieval_db), in
  // the training stream's positions.
  std::optional<ChunkDatabase> retro;
  // seq2seq with data.fusion: each example's (source, target) text, in the splits' order.
  std::vector<std::pair<std::string, std::string>> train_pairs, test_pairs;
};

// A seq2seq example's side as training reads it: its tokens cut to data.max_length, then <eos>.
std::vector<std::int32_t> pair_side(const TrainConfig& cfg, const Tokenizer& tok, const std::string& s);
// A path of the config as given, else beside the config file; neither is an error naming `key`.
std::string resolve_beside_config(const TrainConfig& cfg, const std::string& path, const std::string& key);
// Fusion-in-Decoder (cfg.fusion): opens the passage index in index_dir, building it first when it
// is absent or unfinished (under mpirun, rank 0 builds), and gives every seq2seq example its k
// fused parts (training examples never read their own pair; `training` false: the test split's
// only, as tfm eval needs). Returns the index's passage count.
std::int64_t attach_fusion(const TrainConfig& cfg, TaskData& d, const Tokenizer& tok, const std::string& index_dir, bool training);
// Where a Fusion-in-Decoder model directory keeps its passage index, and fusion.json: {"index",
// "k", "template"}, which tfm translate reads as its --retrieve defaults.
inline constexpr const char* kFusionIndexDir = "fusion_index";
inline constexpr const char* kFusionFile = "fusion.json";

// RETRO: builds the chunk database of a retrieval model's LM data (cfg.retrieval_db).
ChunkDatabase retro_database(const TrainConfig& cfg, const TaskData& d, const RetrievalConfig& rc);
// RETRO: the neighbours (B, L - 1, k, r) of training sequences x (B, T) whose first tokens are at
// `starts` of the training stream: each chunk's but the last (no position reads the last one's),
// none overlapping its sequence's block + 1 tokens (RETRO filters the training sequence's own
// document out). `positions`, when given, receives each neighbour's start in the stream.
Tensor training_neighbours(const ChunkDatabase& db, const Tensor& x, const std::vector<std::int64_t>& starts,
                           std::int64_t block, std::vector<std::int64_t>* positions = nullptr);

// Reads the data (checking it holds at least one batch) and, when `tok` is empty, trains the
// tokenizer on the training split only.
TaskData make_task_data(const TrainConfig& cfg, std::optional<Tokenizer>& tok);
// Held-out-only data from an evaluation file (tfm eval --data): LM text scored in
// non-overlapping windows of cfg.block_size tokens; label<TAB>text lines (labels mapped by
// cfg.labels when set); source<TAB>target lines. `header` skips the first line.
TaskData make_eval_data(const TrainConfig& cfg, const Tokenizer& tok, const std::string& path, bool header);
// The model config for the task (vocab_size and num_labels filled in when the config omits them).
ModelConfig task_model_config(const TrainConfig& cfg, const TaskData& d, std::int64_t vocab);
class Distiller;  // train/distill.h
// The training examples [cursor, cursor + rows) as model inputs and targets: all of a
// micro-batch, or the part of one that a data-parallel rank takes.
struct MicroBatch {
  ModelInputs in;
  Tensor targets;                // lm, seq2seq, speech: (B, T) with -100 at padding; classifiers: (B)
  std::int64_t tokens = 0;       // input tokens (throughput)
  std::int64_t loss_terms = 0;   // targets the mean loss averages over
  // speech with training.ctc_weight: each clip's transcript tokens (B, L) padded, their counts
  // (B), and the blank the encoder's CTC head uses.
  Tensor ctc_targets, ctc_target_lengths;
  std::int64_t ctc_blank = -1;
};
MicroBatch load_micro_batch(TaskData& d, const Model& m, const TrainConfig& cfg, std::int64_t cursor, std::int64_t rows);
// Mean loss of a loaded micro-batch. With a distiller, its mix of the teacher's terms and this
// hard loss.
Tensor micro_batch_loss(const MicroBatch& batch, Model& m, const TrainConfig& cfg, Distiller* distill = nullptr);
// The mean cross-entropy of (B, T, V) logits against (B, T) targets (-100 ignored), with the
// config's label smoothing; a vocabulary-split shard's logits are its columns
// (Model::logits_cross_entropy).
Tensor token_loss(const Model& m, const Tensor& logits, const Tensor& targets, const TrainConfig& cfg);
// The hard loss of a micro-batch's logits: the classifiers' cross-entropy of (B, num_labels)
// logits against (B) labels, with label smoothing, or token_loss of token targets (B, T).
Tensor logits_loss(const Model& m, const Tensor& logits, const Tensor& targets, const TrainConfig& cfg);
// What evaluate() computed besides the numbers: seq2seq's decoded hypotheses (one per scored
// test pair, in order) and the sacreBLEU signature of each translation metric.
struct EvalDetail {
  std::vector<std::string> hypotheses;
  std::map<std::string, std::string> signatures;  // "bleu", "chrf"
  std::vector<std::vector<std::int64_t>> confusion;  // classifiers: [true class][predicted class] counts
};
// Held-out metrics: always "loss"; LM adds "perplexity"; classifier "accuracy", "precision",
// "recall", "f1"; seq2seq "bleu" and "chrf" (sacreBLEU's, src/metrics) of the first
// cfg.bleu_examples test pairs.
std::map<std::string, double> evaluate(TaskData& d, Model& m, const TrainConfig& cfg, EvalDetail* detail = nullptr);

}  // namespace tfm::train_detail
