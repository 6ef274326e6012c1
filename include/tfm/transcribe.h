// Speech recognition with Whisper-style encoder-decoders (docs/speech.md), decoding as
// OpenAI's whisper does (transcribe.py, decoding.py):
//
//   tfm::LoadedModel lm = tfm::load_model("whisper-tiny.en");
//   tfm::Transcriber t(lm);
//   tfm::Transcript r = t.transcribe(tfm::read_audio("talk.wav"), {});
//   for (const auto& s : r.segments) printf("[%.2f -> %.2f] %s\n", s.start, s.end, s.text.c_str());
//
// Audio longer than one 30-second window is transcribed window after window: the log-mel
// spectrogram of the whole file is computed once, each window is decoded, and the next window
// starts where the last complete timestamped segment ended (or after the window without
// timestamps). Each window is decoded greedily, and again at higher temperatures when the text
// repeats itself (gzip compression ratio above a threshold) or is improbable (mean log-prob
// below one); a window whose no-speech probability is high and whose text is improbable is
// skipped as silence.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "tfm/audio.h"
#include "tfm/kv_cache.h"
#include "tfm/model_dir.h"

namespace tfm {

// The special tokens of a Whisper vocabulary, from generation_config.json and the tokenizer.
struct WhisperTokens {
  std::int32_t sot = -1, eot = -1, transcribe = -1, translate = -1, no_timestamps = -1, no_speech = -1, sot_prev = -1;
  std::int32_t timestamp_begin = -1;  // <|0.00|>; timestamps run to the vocabulary's end
  std::vector<std::pair<std::string, std::int32_t>> languages;  // "en" -> <|en|>, in vocabulary order
  std::vector<std::int32_t> suppress, begin_suppress;
  std::int64_t max_initial_timestamp_index = 50;  // the first timestamp comes at most 1.0 s in
  bool multilingual = false;
  // Throws naming what is missing when the model's files do not describe a Whisper vocabulary.
  static WhisperTokens of(const LoadedModel& lm);
  static WhisperTokens of(const ModelConfig& cfg, const Tokenizer& tok, const GenerationDefaults& g);
  std::int32_t language(const std::string& code) const;  // -1 when the vocabulary has none
  std::string language_code(std::int32_t id) const;
};

// OpenAI's ApplyTimestampRules on one row of logits (V): `sampled` are the tokens generated
// in this window so far. No-timestamps is never chosen; timestamps come in pairs (after a
// pair, text or the end; after a lone timestamp, another timestamp or the end) and never go
// back; the first token is a timestamp no later than max_initial_timestamp_index; when the
// timestamps together are likelier than any single text token, a timestamp it is.
void apply_timestamp_rules(std::span<float> logits, std::span<const std::int32_t> sampled, const WhisperTokens& t);

struct TranscribeOptions {
  std::string language;             // "" or "auto": detected from the first window
  std::string task = "transcribe";  // or "translate" (to English)
  bool timestamps = true;           // segment timestamps (off: <|notimestamps|>, one segment per window)
  std::vector<double> temperatures{0.0, 0.2, 0.4, 0.6, 0.8, 1.0};  // the fallback ladder
  std::int64_t beam_size = 5;  // at temperature 0 (1: greedy), as whisper's command line
  std::int64_t best_of = 5;    // samples drawn at each temperature above 0; the likeliest is kept
  // Joint CTC/attention decoding (Watanabe et al. 2017) for models trained with a CTC loss on
  // the encoder (tfm train's training.ctc_weight): at temperature 0 every candidate is ranked by
  // (1 - w) x the decoder's log-probability + w x its CTC prefix score under the head's reading
  // of the encoder's states (the blank: <|nospeech|>). 0: the decoder alone, as whisper decodes.
  double ctc_weight = 0;
  double compression_ratio_threshold = 2.4;  // <= 0: never falls back for repetition
  double logprob_threshold = -1.0;           // mean log-prob below it falls back (-inf: never)
  double no_speech_threshold = 0.6;          // with an improbable text: the window is silence
  bool condition_on_previous_text = true;    // the last window's text as a prompt (<|startofprev|>)
  std::string initial_prompt;                // text before the first window (vocabulary, spelling)
  std::int64_t max_new_tokens = 224;         // per window (Whisper's n_text_ctx / 2)
  std::uint64_t seed = 0;                    // for temperatures above 0
  // Word timestamps (whisper's word_timestamps): each segment's words timed by aligning the
  // text with the audio through the alignment heads' cross-attention (dynamic time warping).
  // Punctuation is merged into the word after (prepend) or before (append) it.
  bool word_timestamps = false;
  std::string prepend_punctuations = "\"'\u201c\u00bf([{-";
  std::string append_punctuations = "\"'.\u3002,\uff0c!\uff01?\uff1f:\uff1a\u201d)]}\u3001";
};

// One word of a transcript with its time (seconds) and the mean probability of its tokens.
struct WordTiming {
  std::string word;  // with its leading space, as the tokens spell it
  std::vector<std::int32_t> tokens;
  double start = 0, end = 0, probability = 0;
};

struct TranscriptSegment {
  double start = 0, end = 0;  // seconds
  double seek = 0;            // where its window started (seconds)
  std::string text;
  std::vector<std::int32_t> tokens;  // timestamps included
  double avg_logprob = 0, compression_ratio = 0, no_speech_prob = 0, temperature = 0;
  std::vector<WordTiming> words;     // with word_timestamps
};

struct Transcript {
  std::string language;  // the code used ("en"), detected or given
  std::string text;      // the segments' texts joined
  std::vector<TranscriptSegment> segments;
  double seconds = 0;    // the audio's length
};

// One window's decoding (Transcriber::decode_window), for tests and tools.
struct WindowResult {
  std::vector<std::int32_t> tokens;  // generated, without the prompt or the end token
  double sum_logprob = 0, avg_logprob = 0, no_speech_prob = 0, compression_ratio = 0, temperature = 0;
  std::string text;
};

class Transcriber {
 public:
  // max_beam: the widest beam search asked of it (one KV-cache slot each).
  explicit Transcriber(LoadedModel& lm, std::int64_t max_beam = 5);
  // A model being trained (its tokenizer and front end held by the trainer).
  Transcriber(Model& model, const Tokenizer& tok, const WhisperTokens& special, const AudioFeatureExtractor& fx,
              std::int64_t max_beam = 1);
  const WhisperTokens& tokens() const { return tok_; }
  // on_segment sees each segment as its window completes; on_progress the seconds done.
  Transcript transcribe(const Audio& audio, const TranscribeOptions& o,
                        const std::function<void(const TranscriptSegment&)>& on_segment = {},
                        const std::function<void(double done, double total)>& on_progress = {});
  // The language of one window of features (n_mels, frames): its code and probability.
  std::pair<std::string, double> detect_language(const Tensor& features);
  // One window (features (n_mels, frames)) from the prompt's tokens, at one temperature:
  // greedy or sampled (seeded), or at temperature 0 with beam_size > 1 whisper's beam search
  // (BeamSearchDecoder, patience 1: the beam_size best finished candidates, ranked by the
  // sum of log-probabilities over their length). ctc_weight > 0 at temperature 0: joint
  // CTC/attention beam search (TranscribeOptions::ctc_weight), beam_size 1 included.
  WindowResult decode_window(const Tensor& features, const std::vector<std::int32_t>& prompt, bool timestamps,
                             double temperature, std::int64_t max_new_tokens, std::uint64_t seed, std::int64_t beam_size = 1,
                             double ctc_weight = 0);
  // Word timing by alignment (openai-whisper's find_alignment): the decoder reads the window's
  // start sequence, <|notimestamps|>, the text tokens and <|endoftext|>; the alignment heads'
  // cross-attention over the first num_frames / 2 positions of the window (features (n_mels,
  // frames)), each head standardised over the tokens and median-filtered (width 7) over time,
  // averaged, is the cost of a dynamic time warping path; each word starts where the path first
  // reaches its first token. Times are seconds from the window's start; probability is the mean
  // of the word's tokens' probabilities. Empty for fewer than two words' worth of tokens.
  std::vector<WordTiming> align_words(const Tensor& features, const std::vector<std::int32_t>& text_tokens,
                                      std::int64_t num_frames, const std::string& language, const std::string& task);
  // whisper's add_word_timestamps over one window's segments (their tokens, start, end and seek
  // in seconds): align their text, clip overlong words at sentence ends, merge punctuation,
  // give each segment its words and fit its bounds to them. last_speech: where the speech
  // before ended (seconds), updated.
  void add_word_timestamps(std::vector<TranscriptSegment>& segments, const Tensor& features, std::int64_t num_frames,
                           const std::string& language, const TranscribeOptions& o, double& last_speech);
  // The prompt of a window: [<|startofprev|> previous...] <|startoftranscript|> [lang] [task] [<|notimestamps|>].
  std::vector<std::int32_t> prompt(const std::vector<std::int32_t>& previous, const std::string& language,
                                   const std::string& task, bool timestamps) const;

 private:
  // The window's cross-attention keys/values into the cache; its encoder states kept for CTC.
  void encode(const Tensor& features);
  // decode_window on the window encode() stored last.
  WindowResult decode_encoded(const std::vector<std::int32_t>& prompt, bool timestamps, double temperature,
                              std::int64_t max_new_tokens, std::uint64_t seed, std::int64_t beam_size, double ctc_weight);
  // The logit rules of step `step` on one row: suppressed tokens, the first step's, timestamps.
  void filter(std::vector<float>& row, std::span<const std::int32_t> sampled, bool timestamps) const;
  WindowResult beam_search(const std::vector<std::int32_t>& prompt, const Tensor& prompt_logits, bool timestamps,
                           std::int64_t max_new_tokens, std::int64_t beam_size, double ctc_weight);
  // The CTC head's log-probabilities over the last encoded window: (frames x vocab).
  std::vector<float> ctc_log_probs() const;
  void finish(WindowResult& r) const;  // text, mean log-probability, compression ratio
  // The words of text tokens (+ <|endoftext|>), split as whisper splits them: on spaces and
  // punctuation, or on character boundaries for languages written without spaces.
  std::pair<std::vector<std::string>, std::vector<std::vector<std::int32_t>>> split_words(
      const std::vector<std::int32_t>& tokens, const std::string& language) const;
  std::vector<std::pair<std::int64_t, std::int64_t>> alignment_heads_;
  Model& model_;
  const Tokenizer& text_;
  WhisperTokens tok_;
  AudioFeatureExtractor fx_;
  KVCache cache_;
  Tensor encoded_;  // the last window's encoder states (1, frames, C)
};

// A transcript as a file: "txt" (one trimmed line per segment), "srt", "vtt", or
// "verbose_json" (OpenAI's shape: task, language name, duration, text, segments with their
// decoding figures). `task` is the verbose_json's "task".
std::string format_transcript(const Transcript& t, const std::string& format, const std::string& task = "transcribe");

// whisper's merge_punctuations: a word that is a leading punctuation mark joins the word after
// it, one that is a trailing mark joins the word before it (the emptied entry stays, as "").
void merge_punctuations(std::vector<WordTiming>& words, const std::string& prepended, const std::string& appended);
// Dynamic time warping through a cost matrix (rows x cols, row-major) as whisper's dtw_cpu
// walks it (ties to the diagonal's loss: left before up): the (row, col) pairs of the path.
std::vector<std::pair<std::int64_t, std::int64_t>> dtw_path(const std::vector<double>& cost, std::int64_t rows,
                                                           std::int64_t cols);

// Whisper's English name of a language code ("en" -> "english"; the code itself when unknown).
std::string whisper_language_name(const std::string& code);

// gzip's compression ratio of a text (bytes / deflated bytes), Whisper's repetition test.
double compression_ratio(std::string_view text);

}  // namespace tfm
