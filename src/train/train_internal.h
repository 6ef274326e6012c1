// Pieces of the training loop shared between src/train/*.cpp (not public API).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tfm/audio.h"
#include "tfm/image.h"
#include "tfm/tensor.h"
#include "tfm/transcribe.h"

namespace tfm::train_detail {

// Token ids of an LM stream, 2 bytes each when the vocabulary fits in 16 bits (every char
// and word vocabulary we train, GPT-2's 50257), else 4: a 1 GB text of char tokens is 2 GB
// of ids here rather than 4 (int32) or 8 (int64).
class TokenStore {
 public:
  explicit TokenStore(std::int64_t vocab_size = 1 << 16) : wide_(vocab_size > (1 << 16)) {}
  void append(const std::vector<std::int32_t>& ids);
  std::int64_t size() const { return static_cast<std::int64_t>(wide_ ? i32_.size() : u16_.size()); }
  std::int32_t operator[](std::int64_t i) const {
    return wide_ ? i32_[static_cast<std::size_t>(i)] : static_cast<std::int32_t>(u16_[static_cast<std::size_t>(i)]);
  }
  TokenStore slice(std::int64_t from, std::int64_t to) const;  // a copy of [from, to)
  void truncate(std::int64_t n);                               // keep [0, n), release the rest
  std::size_t bytes_per_token() const { return wide_ ? 4 : 2; }

 private:
  bool wide_;
  std::vector<std::uint16_t> u16_;
  std::vector<std::int32_t> i32_;
};

// Decoder-only LM data: the token stream is cut into sequences of block_size + 1 tokens
// (packing: documents run on across sequence boundaries). Each epoch starts the cut at a
// seeded offset in [0, block_size) and visits the sequences in a seeded order, so sequence
// number `cursor` (counted over the whole run) is a pure function of (seed, cursor): that
// cursor is all a checkpoint needs to resume the data stream exactly.
class LmData {
 public:
  // An empty `train` makes held-out-only data (tfm eval); else it must hold one sequence.
  LmData(TokenStore train, TokenStore val, std::int64_t block_size, std::uint64_t seed);
  std::int64_t sequences_per_epoch() const { return per_epoch_; }
  std::int64_t val_sequences() const;
  std::int64_t train_tokens() const { return train_.size(); }
  // Training batch of `batch` sequences starting at `cursor`: x, y (batch, block) i64.
  // starts, when given, receives each sequence's first position in the training stream.
  void train_batch(std::int64_t cursor, std::int64_t batch, Tensor& x, Tensor& y,
                   std::vector<std::int64_t>* starts = nullptr);
  const TokenStore& train_stream() const { return train_; }
  const TokenStore& val_stream() const { return val_; }
  // Held-out batch: consecutive non-overlapping val sequences starting at index first.
  void val_batch(std::int64_t first, std::int64_t batch, Tensor& x, Tensor& y) const;

 private:
  const std::vector<std::int64_t>& order(std::int64_t epoch);
  TokenStore train_, val_;
  std::int64_t block_, per_epoch_;
  std::uint64_t seed_;
  std::int64_t cached_epoch_ = -1;
  std::vector<std::int64_t> order_;
  std::int64_t shift_ = 0;
};

// Classifier data: `label<TAB>text` lines; a seeded test split (never trained on); training
// examples visited in a seeded order per epoch, so example number `cursor` is a function of
// (seed, cursor) as for LmData. Batches are padded to their longest sequence; valid_lens
// marks the padding. Each sequence is <bos> + the text's tokens, truncated to max_length.
struct ClsExample {
  std::vector<std::int32_t> ids;
  std::int64_t label;
};
class ClsData {
 public:
  ClsData(std::vector<ClsExample> train, std::vector<ClsExample> test, std::uint64_t seed, std::int32_t pad_id);
  std::int64_t train_size() const { return static_cast<std::int64_t>(train_.size()); }
  std::int64_t test_size() const { return static_cast<std::int64_t>(test_.size()); }
  // input_ids (B, T) i64, valid_lens (B) i64, labels (B) i64.
  void train_batch(std::int64_t cursor, std::int64_t batch, Tensor& ids, Tensor& lens, Tensor& labels);
  void test_batch(std::int64_t first, std::int64_t batch, Tensor& ids, Tensor& lens, Tensor& labels) const;

 private:
  void pack(const std::vector<const ClsExample*>& ex, Tensor& ids, Tensor& lens, Tensor& labels) const;
  std::vector<ClsExample> train_, test_;
  std::uint64_t seed_;
  std::int32_t pad_;
  std::int64_t cached_epoch_ = -1;
  std::vector<std::int64_t> order_;
};

// Image classifier data: labelled images, a test split (a file of its own or a seeded
// fraction), training images visited in a seeded order per epoch. Each training image is
// augmented with draws that depend only on (seed, cursor) (random crop from a zero-padded
// copy, horizontal flip), then goes through the processor (resize/crop, rescale, normalise).
struct ImageAugment {
  std::int64_t crop_padding = 0;  // > 0: pad by this many pixels, crop back to the size at a random place
  bool horizontal_flip = false;   // flip half of the images
  double random_erasing = 0.0;    // the chance of random erasing (Zhong et al. 2017) on each image
};
class ImageData {
 public:
  ImageData(LabeledImages train, LabeledImages test, ImageProcessor processor, ImageAugment augment, std::uint64_t seed);
  std::int64_t train_size() const { return static_cast<std::int64_t>(train_.images.size()); }
  std::int64_t test_size() const { return static_cast<std::int64_t>(test_.images.size()); }
  const ImageProcessor& processor() const { return processor_; }
  // pixel_values (B, 3, H, W) f32, labels (B) i64.
  void train_batch(std::int64_t cursor, std::int64_t batch, Tensor& pixels, Tensor& labels);
  void test_batch(std::int64_t first, std::int64_t batch, Tensor& pixels, Tensor& labels) const;
  // The processed size (H, W) of the images.
  std::pair<std::int64_t, std::int64_t> pixel_size() const;

 private:
  LabeledImages train_, test_;
  ImageProcessor processor_;
  ImageAugment augment_;
  std::uint64_t seed_;
  std::int64_t cached_epoch_ = -1;
  std::vector<std::int64_t> order_;
};

// Speech (task "speech"): clips with their transcripts. Each clip keeps the log-mel frames of
// its window that hold sound (and the STFT's overlap into the padding); the rest of the window
// is the padding's one value, so 6,000 clips of a 6-s window fit in memory.
struct SpeechClip {
  Tensor frames;        // (n_mels, stored) f32: the window's first columns
  float padding = 0;    // the value of every later column of the window
  std::vector<std::int32_t> text;  // the transcript's tokens
  std::string transcript;
  double seconds = 0;
};
// SpecAugment (Park et al. 2019) on the training features: `time_masks` spans of up to
// time_width frames and `freq_masks` bands of up to freq_width mel bins, set to the clip's mean.
struct SpecAugmentConfig {
  std::int64_t time_masks = 0, time_width = 0, freq_masks = 0, freq_width = 0;
};
struct SpeechDataOptions {
  std::int64_t window_frames = 3000;  // the model's window in feature frames
  double frames_per_second = 100;     // sampling rate / hop_length
  SpecAugmentConfig augment;
  double timestamps_fraction = 0;
  double pack_fraction = 0;  // of the training windows, those that take more clips after the first
  std::int64_t max_target_positions = 448;  // the decoder's: a packed window's tokens fit in them
  std::uint64_t seed = 0;
};
class SpeechData {
 public:
  SpeechData(std::vector<SpeechClip> train, std::vector<SpeechClip> test, const WhisperTokens& special, SpeechDataOptions o);
  std::int64_t train_size() const { return static_cast<std::int64_t>(train_.size()); }
  std::int64_t test_size() const { return static_cast<std::int64_t>(test_.size()); }
  const std::vector<SpeechClip>& test() const { return test_; }
  // input_features (B, n_mels, window) and the decoder's inputs and labels (-100 at padding):
  // <|startoftranscript|> then <|notimestamps|> text <|endoftext|>, or (timestamps_fraction of
  // the training windows) <|start|> text <|end|> per clip, then <|endoftext|>, as Whisper trains.
  // pack_fraction of the training windows are filled with further clips, drawn at random, as
  // long as they fit behind the first (each after a pause of up to 0.3 s): a window then
  // holds several sentences, as Whisper's 30-s windows do, and a step reads more speech.
  // ctc_targets / ctc_lengths, when given: each window's transcript tokens (B, L), padded
  // with 0, and their counts (B), for a CTC loss on the encoder.
  void train_batch(std::int64_t cursor, std::int64_t batch, Tensor& features, Tensor& dec_in, Tensor& labels,
                   Tensor* ctc_targets = nullptr, Tensor* ctc_lengths = nullptr);
  void test_batch(std::int64_t first, std::int64_t batch, Tensor& features, Tensor& dec_in, Tensor& labels) const;
  Tensor window(const SpeechClip& c) const;  // (n_mels, window) as the model reads it

 private:
  // One window's clips and the frame each starts at.
  struct Window {
    std::vector<const SpeechClip*> clips;
    std::vector<std::int64_t> starts;
    bool timestamps = false;
  };
  std::int64_t sound_frames(const SpeechClip& c) const;
  void pack(const std::vector<Window>& windows, bool augment, std::uint64_t draw, Tensor& features, Tensor& dec_in,
            Tensor& labels) const;
  std::vector<SpeechClip> train_, test_;
  WhisperTokens special_;
  SpeechDataOptions o_;
  std::int64_t cached_epoch_ = -1;
  std::vector<std::int64_t> order_;
};

// Reads a `label<TAB>text` file line by line (optionally skipping a header line). Labels are
// numbered in sorted order of their names, or, when `known_labels` is given (a trained
// model's), by their place in it (a label outside it is an error naming file:line).
struct LabeledText {
  std::vector<std::string> texts;
  std::vector<std::int64_t> labels;
  std::vector<std::string> label_names;
};
LabeledText read_labeled_tsv(const std::string& path, bool header, const std::vector<std::string>& known_labels = {});
// Reads `source<TAB>target[<TAB>...]` lines (a UTF-8 byte-order mark and a header line
// skipped); a line without a tab is an error naming file:line.
std::vector<std::pair<std::string, std::string>> read_pairs_tsv(const std::string& path, bool header);
// A seeded permutation of [0, n).
std::vector<std::int64_t> seeded_permutation(std::int64_t n, std::uint64_t seed);

// Binary/multiclass scores: accuracy, and precision/recall/F1 of class `positive`.
struct ClassScores {
  double accuracy = 0, precision = 0, recall = 0, f1 = 0;
};
ClassScores class_scores(const std::vector<std::int64_t>& predicted, const std::vector<std::int64_t>& truth,
                         std::int64_t positive);

// Sequence-to-sequence data: (source ids, target ids) pairs, each ending in <eos>. Each
// epoch's order is a seeded permutation whose windows of 50 batches are sorted by source
// length, so a batch holds sequences of similar length (little padding) and the order is
// still a function of (seed, epoch) only.
struct PairExample {
  std::vector<std::int32_t> src, tgt;
  // Fusion-in-Decoder: the source joined with each of its passages, encoded alone (replace src).
  std::vector<std::vector<std::int32_t>> parts;
};
class Seq2SeqData {
 public:
  Seq2SeqData(std::vector<PairExample> train, std::vector<PairExample> test, std::uint64_t seed, std::int32_t pad_id,
              std::int32_t bos_id, std::int64_t batch);
  std::int64_t train_size() const { return static_cast<std::int64_t>(train_.size()); }
  const std::vector<PairExample>& test() const { return test_; }
  std::vector<PairExample>& train_examples() { return train_; }
  std::vector<PairExample>& test_examples() { return test_; }
  // Fusion-in-Decoder: every example holds this many parts (0: plain sources).
  std::int64_t fused_parts() const { return fused_parts_; }
  void set_fused_parts(std::int64_t k) { fused_parts_ = k; }
  // input_ids (B, S), valid_lens (B), decoder_input_ids (B, T) = <bos> + target[:-1],
  // labels (B, T) with -100 at padding. With fused parts, input_ids (B * k, S) and valid_lens
  // (B * k) hold each example's parts in turn (ModelInputs::fused_parts).
  void train_batch(std::int64_t cursor, std::int64_t batch, Tensor& src, Tensor& src_lens, Tensor& dec_in, Tensor& labels);
  void pack(const std::vector<const PairExample*>& ex, Tensor& src, Tensor& src_lens, Tensor& dec_in,
            Tensor& labels) const;

 private:
  std::vector<PairExample> train_, test_;
  std::uint64_t seed_;
  std::int32_t pad_, bos_;
  std::int64_t batch_;
  std::int64_t cached_epoch_ = -1;
  std::int64_t fused_parts_ = 0;
  std::vector<std::int64_t> order_;
};

// splitmix64: a tiny, well-mixed hash for deriving per-epoch and per-use seeds.
std::uint64_t mix64(std::uint64_t x);

// metrics.jsonl: one JSON object per line, appended and flushed per record.
struct MetricPoint {
  std::int64_t step;
  double value;
};
struct Curves {
  std::vector<MetricPoint> train_loss, val_loss;
};
void append_metrics_line(const std::string& path, const std::string& json_line);
// Reads metrics.jsonl back (resume), keeping records with step <= up_to_step, rewrites the
// file with only those, and returns the loss curves they hold.
Curves reload_metrics(const std::string& path, std::int64_t up_to_step);

// Refuses an output directory that cannot be written, or created when it does not exist yet
// (tried by writing a file there or in its nearest existing ancestor, since root ignores
// permissions), creating nothing: the first check of a training run.
void check_output_dir(const std::string& out_dir);
// A training run's hold on its output directory, taken once the config checks passed and
// before any training work: creates the directory and refuses one that another run holds
// (an exclusive flock on DIR/.tfm-train.lock, dropped by the kernel however the run ends).
class OutputDirLock {
 public:
  explicit OutputDirLock(const std::string& out_dir);
  ~OutputDirLock();
  OutputDirLock(const OutputDirLock&) = delete;
  OutputDirLock& operator=(const OutputDirLock&) = delete;

 private:
  int fd_ = -1;
};

// curves.svg: train and eval loss against step, with axes and ticks (hand-written SVG).
std::string loss_curves_svg(const Curves& c, const std::string& title);
// confusion.svg: counts[true][predicted] as a heat map of per-class fractions.
std::string confusion_matrix_svg(const std::vector<std::vector<std::int64_t>>& counts, const std::vector<std::string>& names,
                                 const std::string& title);

}  // namespace tfm::train_detail
