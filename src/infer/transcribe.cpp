// Whisper decoding (tfm/transcribe.h): the token rules, one window's greedy or sampled
// decoding over the KV cache, the temperature fallback and the long-form seek, as OpenAI's
// whisper (transcribe.py, decoding.py) does them.
#include "tfm/transcribe.h"

#include <zlib.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <optional>

#include "infer/ctc_prefix_score.h"
#include "tfm/autograd.h"
#include "tfm/error.h"
#include "tfm/metrics.h"
#include "tfm/ops.h"

namespace tfm {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr double kSecondsPerTimestamp = 0.02;

std::int32_t token_id(const Tokenizer& tok, const char* s) { return tok.token_to_id(s); }

// log_softmax of a row, in double.
std::vector<double> log_softmax_row(std::span<const float> x) {
  double top = -std::numeric_limits<double>::infinity();
  for (float v : x) top = std::max(top, static_cast<double>(v));
  double sum = 0;
  for (float v : x) sum += std::exp(static_cast<double>(v) - top);
  const double lse = top + std::log(sum);
  std::vector<double> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = static_cast<double>(x[i]) - lse;
  return out;
}

std::uint64_t splitmix(std::uint64_t& s) {
  std::uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A draw from softmax(logits / temperature).
std::int32_t sample_row(std::span<const float> logits, double temperature, std::uint64_t& rng) {
  double top = -std::numeric_limits<double>::infinity();
  for (float v : logits) top = std::max(top, static_cast<double>(v));
  std::vector<double> p(logits.size());
  double sum = 0;
  for (std::size_t i = 0; i < logits.size(); ++i) sum += p[i] = std::exp((static_cast<double>(logits[i]) - top) / temperature);
  double u = static_cast<double>(splitmix(rng) >> 11) * 0x1.0p-53 * sum;
  for (std::size_t i = 0; i < p.size(); ++i) {
    if (u < p[i]) return static_cast<std::int32_t>(i);
    u -= p[i];
  }
  return static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

std::int32_t argmax_row(std::span<const float> x) {
  return static_cast<std::int32_t>(std::max_element(x.begin(), x.end()) - x.begin());  // first of ties, as torch
}

Tensor id_tensor(const std::vector<std::int32_t>& ids) {
  return Tensor::from_ints(std::vector<std::int64_t>(ids.begin(), ids.end()), {1, static_cast<std::int64_t>(ids.size())});
}

std::vector<float> row_of(const Tensor& logits, std::int64_t r) {
  const std::int64_t V = logits.size(-1);
  const Tensor c = contiguous(logits);
  const float* p = c.data<float>() + r * V;
  return std::vector<float>(p, p + V);
}

}  // namespace

namespace {

// "00:01:02,345" (srt) or "00:01:02.345" (vtt).
std::string clock(double seconds, char sep) {
  const auto ms = static_cast<std::int64_t>(std::llround(std::max(0.0, seconds) * 1000.0));
  char buf[48];
  std::snprintf(buf, sizeof buf, "%02lld:%02lld:%02lld%c%03lld", static_cast<long long>(ms / 3600000),
                static_cast<long long>(ms / 60000 % 60), static_cast<long long>(ms / 1000 % 60), sep,
                static_cast<long long>(ms % 1000));
  return buf;
}

std::string trimmed(const std::string& s) {
  const std::size_t a = s.find_first_not_of(" \t\n"), b = s.find_last_not_of(" \t\n");
  return a == std::string::npos ? "" : s.substr(a, b - a + 1);
}

}  // namespace

std::string format_transcript(const Transcript& t, const std::string& format, const std::string& task) {
  std::string out;
  if (format == "txt") {
    for (const auto& s : t.segments) out += trimmed(s.text) + "\n";
  } else if (format == "srt" || format == "vtt") {
    if (format == "vtt") out += "WEBVTT\n\n";
    const char sep = format == "srt" ? ',' : '.';
    for (std::size_t i = 0; i < t.segments.size(); ++i) {
      const auto& s = t.segments[i];
      if (format == "srt") out += std::to_string(i + 1) + "\n";
      out += clock(s.start, sep) + " --> " + clock(s.end, sep) + "\n" + trimmed(s.text) + "\n\n";
    }
  } else {
    TFM_CHECK(format == "verbose_json", "transcript", "format must be txt, srt, vtt or verbose_json, got '", format, "'");
    nlohmann::json segs = nlohmann::json::array(), words = nlohmann::json::array();
    for (std::size_t i = 0; i < t.segments.size(); ++i) {
      const auto& s = t.segments[i];
      segs.push_back({{"id", i}, {"seek", static_cast<std::int64_t>(std::llround(s.seek * 100.0))}, {"start", s.start},
                      {"end", s.end}, {"text", s.text}, {"tokens", s.tokens}, {"temperature", s.temperature},
                      {"avg_logprob", s.avg_logprob}, {"compression_ratio", s.compression_ratio},
                      {"no_speech_prob", s.no_speech_prob}});
      if (s.words.empty()) continue;
      // Word timestamps: whisper's per segment (the word as its tokens spell it, with its
      // probability), and OpenAI's list for the whole text (the word trimmed).
      nlohmann::json seg_words = nlohmann::json::array();
      for (const WordTiming& w : s.words) {
        seg_words.push_back({{"word", w.word}, {"start", w.start}, {"end", w.end}, {"probability", w.probability}});
        words.push_back({{"word", trimmed(w.word)}, {"start", w.start}, {"end", w.end}});
      }
      segs.back()["words"] = std::move(seg_words);
    }
    nlohmann::json doc{{"task", task}, {"language", whisper_language_name(t.language)}, {"duration", t.seconds},
                       {"text", trimmed(t.text)}, {"segments", segs}};
    if (!words.empty()) doc["words"] = std::move(words);
    out = doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  return out;
}

std::string whisper_language_name(const std::string& code) {
  static const std::pair<const char*, const char*> names[] = {
      {"en", "english"}, {"zh", "chinese"}, {"de", "german"}, {"es", "spanish"}, {"ru", "russian"}, {"ko", "korean"},
      {"fr", "french"}, {"ja", "japanese"}, {"pt", "portuguese"}, {"tr", "turkish"}, {"pl", "polish"}, {"ca", "catalan"},
      {"nl", "dutch"}, {"ar", "arabic"}, {"sv", "swedish"}, {"it", "italian"}, {"id", "indonesian"}, {"hi", "hindi"},
      {"fi", "finnish"}, {"vi", "vietnamese"}, {"he", "hebrew"}, {"uk", "ukrainian"}, {"el", "greek"}, {"ms", "malay"},
      {"cs", "czech"}, {"ro", "romanian"}, {"da", "danish"}, {"hu", "hungarian"}, {"ta", "tamil"}, {"no", "norwegian"},
      {"th", "thai"}, {"ur", "urdu"}, {"hr", "croatian"}, {"bg", "bulgarian"}, {"lt", "lithuanian"}, {"la", "latin"},
      {"mi", "maori"}, {"ml", "malayalam"}, {"cy", "welsh"}, {"sk", "slovak"}, {"te", "telugu"}, {"fa", "persian"},
      {"lv", "latvian"}, {"bn", "bengali"}, {"sr", "serbian"}, {"az", "azerbaijani"}, {"sl", "slovenian"},
      {"kn", "kannada"}, {"et", "estonian"}, {"mk", "macedonian"}, {"br", "breton"}, {"eu", "basque"},
      {"is", "icelandic"}, {"hy", "armenian"}, {"ne", "nepali"}, {"mn", "mongolian"}, {"bs", "bosnian"},
      {"kk", "kazakh"}, {"sq", "albanian"}, {"sw", "swahili"}, {"gl", "galician"}, {"mr", "marathi"}, {"pa", "punjabi"},
      {"si", "sinhala"}, {"km", "khmer"}, {"sn", "shona"}, {"yo", "yoruba"}, {"so", "somali"}, {"af", "afrikaans"},
      {"oc", "occitan"}, {"ka", "georgian"}, {"be", "belarusian"}, {"tg", "tajik"}, {"sd", "sindhi"}, {"gu", "gujarati"},
      {"am", "amharic"}, {"yi", "yiddish"}, {"lo", "lao"}, {"uz", "uzbek"}, {"fo", "faroese"}, {"ht", "haitian creole"},
      {"ps", "pashto"}, {"tk", "turkmen"}, {"nn", "nynorsk"}, {"mt", "maltese"}, {"sa", "sanskrit"},
      {"lb", "luxembourgish"}, {"my", "myanmar"}, {"bo", "tibetan"}, {"tl", "tagalog"}, {"mg", "malagasy"},
      {"as", "assamese"}, {"tt", "tatar"}, {"haw", "hawaiian"}, {"ln", "lingala"}, {"ha", "hausa"}, {"ba", "bashkir"},
      {"jw", "javanese"}, {"su", "sundanese"}, {"yue", "cantonese"}};
  for (const auto& [c, n] : names)
    if (code == c) return n;
  return code;
}

double compression_ratio(std::string_view text) {
  if (text.empty()) return 0.0;
  uLongf size = compressBound(static_cast<uLong>(text.size()));
  std::vector<Bytef> out(size);
  TFM_CHECK(compress2(out.data(), &size, reinterpret_cast<const Bytef*>(text.data()), static_cast<uLong>(text.size()),
                      Z_DEFAULT_COMPRESSION) == Z_OK,
            "compression_ratio", "zlib failed");
  return static_cast<double>(text.size()) / static_cast<double>(size);
}

// ---- the vocabulary's special tokens -----------------------------------------------------
WhisperTokens WhisperTokens::of(const LoadedModel& lm) { return of(lm.config, lm.tokenizer, lm.generation); }

WhisperTokens WhisperTokens::of(const ModelConfig& config, const Tokenizer& tok, const GenerationDefaults& g) {
  WhisperTokens t;
  const char* where = "whisper";
  TFM_CHECK(config.reads_audio() && config.architecture == Architecture::encoder_decoder, where,
            "the model does not read audio (a Whisper-style encoder-decoder is needed)");
  t.sot = token_id(tok, "<|startoftranscript|>");
  if (t.sot < 0 && g.decoder_start_token_id) t.sot = static_cast<std::int32_t>(*g.decoder_start_token_id);
  t.eot = token_id(tok, "<|endoftext|>");
  if (t.eot < 0 && !g.eos_token_ids.empty()) t.eot = static_cast<std::int32_t>(g.eos_token_ids.front());
  t.transcribe = token_id(tok, "<|transcribe|>");
  t.translate = token_id(tok, "<|translate|>");
  t.sot_prev = token_id(tok, "<|startofprev|>");
  t.no_timestamps = g.no_timestamps_token_id ? static_cast<std::int32_t>(*g.no_timestamps_token_id)
                                             : token_id(tok, "<|notimestamps|>");
  t.no_speech = token_id(tok, "<|nospeech|>");
  if (t.no_speech < 0) t.no_speech = token_id(tok, "<|nocaptions|>");  // the name in older vocabularies
  TFM_CHECK(t.sot >= 0 && t.eot >= 0 && t.no_timestamps >= 0, where,
            "the tokenizer lacks Whisper's <|startoftranscript|>, <|endoftext|> or <|notimestamps|>");
  t.timestamp_begin = t.no_timestamps + 1;
  TFM_CHECK(t.timestamp_begin < config.vocab_size, where, "no timestamp tokens after <|notimestamps|> (id ",
            t.no_timestamps, ", vocab_size ", config.vocab_size, ")");
  // The languages: the lang_to_id table, else every <|xx|> token between the start token and
  // <|translate|> (Whisper's order).
  if (!g.lang_to_id.empty()) {
    for (const auto& [name, id] : g.lang_to_id)
      if (name.size() > 4) t.languages.emplace_back(name.substr(2, name.size() - 4), static_cast<std::int32_t>(id));
    std::sort(t.languages.begin(), t.languages.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  } else if (t.translate > t.sot) {
    for (std::int32_t id = t.sot + 1; id < t.translate; ++id) {
      const std::string s = tok.id_to_token(id);
      if (s.size() > 4 && s.rfind("<|", 0) == 0) t.languages.emplace_back(s.substr(2, s.size() - 4), id);
    }
  }
  t.multilingual = g.is_multilingual ? *g.is_multilingual : config.vocab_size >= 51865;
  for (std::int64_t id : g.suppress_tokens) t.suppress.push_back(static_cast<std::int32_t>(id));
  for (std::int64_t id : g.begin_suppress_tokens) t.begin_suppress.push_back(static_cast<std::int32_t>(id));
  if (g.max_initial_timestamp_index) t.max_initial_timestamp_index = *g.max_initial_timestamp_index;
  for (std::int32_t id : t.suppress) TFM_CHECK(id < config.vocab_size, where, "suppress_tokens holds id ", id, " past the vocabulary");
  for (std::int32_t id : t.begin_suppress)
    TFM_CHECK(id < config.vocab_size, where, "begin_suppress_tokens holds id ", id, " past the vocabulary");
  return t;
}

std::int32_t WhisperTokens::language(const std::string& code) const {
  for (const auto& [c, id] : languages)
    if (c == code) return id;
  return -1;
}

std::string WhisperTokens::language_code(std::int32_t id) const {
  for (const auto& [c, i] : languages)
    if (i == id) return c;
  return "";
}

void apply_timestamp_rules(std::span<float> logits, std::span<const std::int32_t> sampled, const WhisperTokens& t) {
  const auto V = static_cast<std::int32_t>(logits.size());
  const std::int32_t tb = t.timestamp_begin;
  const auto block = [&](std::int32_t from, std::int32_t to) {
    for (std::int32_t i = std::max(from, 0); i < std::min(to, V); ++i) logits[static_cast<std::size_t>(i)] = kNegInf;
  };
  block(t.no_timestamps, t.no_timestamps + 1);
  const std::size_t n = sampled.size();
  const bool last_ts = n >= 1 && sampled[n - 1] >= tb;
  const bool penultimate_ts = n < 2 || sampled[n - 2] >= tb;
  if (last_ts) {
    if (penultimate_ts) block(tb, V);  // a pair is complete: text (or the end) follows
    else block(0, t.eot);              // a lone timestamp closes its segment: no text
  }
  std::int32_t last_time = -1;
  for (std::int32_t tok : sampled)
    if (tok >= tb) last_time = tok;
  if (last_time >= 0) {
    // Never backwards; and a segment that just opened must not close at its own start.
    const std::int32_t first_allowed = last_ts && !penultimate_ts ? last_time : last_time + 1;
    block(tb, first_allowed);
  }
  if (n == 0) {
    block(0, tb);  // a window starts with a timestamp
    if (t.max_initial_timestamp_index >= 0)
      block(tb + static_cast<std::int32_t>(t.max_initial_timestamp_index) + 1, V);
  }
  // When the timestamps together outweigh every single text token, take a timestamp.
  const std::vector<double> lp = log_softmax_row(logits);
  double ts_mass = -std::numeric_limits<double>::infinity(), text_max = -std::numeric_limits<double>::infinity();
  for (std::int32_t i = tb; i < V; ++i) {
    const double v = lp[static_cast<std::size_t>(i)];
    if (v == -std::numeric_limits<double>::infinity()) continue;
    ts_mass = ts_mass == -std::numeric_limits<double>::infinity()
                  ? v
                  : std::max(ts_mass, v) + std::log1p(std::exp(-std::abs(ts_mass - v)));
  }
  for (std::int32_t i = 0; i < tb; ++i) text_max = std::max(text_max, lp[static_cast<std::size_t>(i)]);
  if (ts_mass > text_max) block(0, tb);
}

// ---- one window --------------------------------------------------------------------------
Transcriber::Transcriber(LoadedModel& lm, std::int64_t max_beam)
    : Transcriber(lm.model, lm.tokenizer, WhisperTokens::of(lm),
                  lm.audio_features ? *lm.audio_features : AudioFeatureExtractor::whisper(lm.config.num_mel_bins), max_beam) {
  alignment_heads_ = lm.generation.alignment_heads;
}

Transcriber::Transcriber(Model& model, const Tokenizer& tok, const WhisperTokens& special, const AudioFeatureExtractor& fx,
                         std::int64_t max_beam)
    : model_(model),
      text_(tok),
      tok_(special),
      fx_(fx),
      cache_(model.config(), std::max<std::int64_t>(max_beam, 1), model.config().max_positions, 1,
             model.config().max_source_positions) {
  TFM_CHECK(fx.options().n_mels == model.config().num_mel_bins, "transcribe", "the front end gives ", fx.options().n_mels,
            " mel bins; the model reads ", model.config().num_mel_bins);
  for (std::int64_t s = 0; s < cache_.slots(); ++s) cache_.bind_source(s, 0);
}

void Transcriber::filter(std::vector<float>& row, std::span<const std::int32_t> sampled, bool timestamps) const {
  for (std::int32_t id : tok_.suppress) row[static_cast<std::size_t>(id)] = kNegInf;
  if (sampled.empty())
    for (std::int32_t id : tok_.begin_suppress) row[static_cast<std::size_t>(id)] = kNegInf;
  if (timestamps) apply_timestamp_rules(row, sampled, tok_);
}

void Transcriber::finish(WindowResult& r) const {
  std::vector<std::int32_t> text;
  for (std::int32_t t : r.tokens)
    if (t < tok_.eot) text.push_back(t);
  r.text = metrics::valid_utf8(text_.decode(text));  // a token may end inside a character: U+FFFD, as Python
  r.avg_logprob = r.sum_logprob / static_cast<double>(r.tokens.size() + 1);
  r.compression_ratio = compression_ratio(r.text);
}

// whisper's BeamSearchDecoder: every live beam proposes its beam_size + 1 likeliest tokens;
// candidates (keyed by their whole sequence, so equal beams merge) are ranked by their summed
// log-probability; those ending the text join the finished list (until it holds beam_size),
// the best beam_size others live on. The KV cache slots follow their beams (reorder).
//
// With ctc_weight w > 0 (joint CTC/attention decoding, as ESPnet decodes): each beam proposes
// more tokens (the CTC scores may reorder them), and candidates are ranked by (1 - w) x the
// decoder's summed log-probability + w x the CTC prefix score of their text; the end of the
// text takes the CTC probability of exactly that text, and the finished are ranked by that
// joint score without dividing by the length (the CTC term already penalises text that is too
// short or too long). Timestamps and other special tokens leave the CTC prefix as it was.
WindowResult Transcriber::beam_search(const std::vector<std::int32_t>& prompt, const Tensor& prompt_logits, bool timestamps,
                                      std::int64_t max_new_tokens, std::int64_t beam_size, double ctc_weight) {
  TFM_CHECK(beam_size <= cache_.slots(), "transcribe", "beam size ", beam_size, " is wider than the ", cache_.slots(),
            " beams this transcriber holds");
  TFM_CHECK(ctc_weight >= 0 && ctc_weight <= 1, "transcribe", "the CTC weight must lie in [0, 1], got ", ctc_weight);
  const bool joint = ctc_weight > 0;
  std::optional<CtcPrefixScorer> ctc;
  if (joint) {
    TFM_CHECK(tok_.no_speech >= 0, "transcribe", "joint CTC decoding needs <|nospeech|> (the CTC blank) in the vocabulary");
    const std::int64_t vocab = prompt_logits.size(-1);
    std::vector<float> lp = ctc_log_probs();
    TFM_CHECK(static_cast<std::int64_t>(lp.size()) % vocab == 0, "transcribe", "the CTC head's output (", lp.size(),
              " numbers) is not frames x the decoder's ", vocab, " tokens");
    const auto frames = static_cast<std::int64_t>(lp.size()) / vocab;
    ctc.emplace(std::move(lp), frames, vocab, tok_.no_speech);
  }
  const auto P = static_cast<std::int64_t>(prompt.size());
  cache_.reorder(std::vector<std::int64_t>(static_cast<std::size_t>(beam_size), 0));  // every beam starts from the prompt
  struct Beam {
    std::vector<std::int32_t> tokens;  // after the prompt
    double sum_logprob = 0;            // the decoder's
    CtcPrefixScorer::State ctc;        // with joint decoding: the text's CTC prefix
    double score = 0;                  // the ranking's: sum_logprob, or the joint score
  };
  const auto joint_score = [&](double att, double ctc_score) { return (1 - ctc_weight) * att + ctc_weight * ctc_score; };
  std::vector<Beam> beams(static_cast<std::size_t>(beam_size));
  if (joint)
    for (Beam& b : beams) b.ctc = ctc->initial();
  std::vector<std::vector<float>> rows(static_cast<std::size_t>(beam_size), row_of(prompt_logits, P - 1));
  std::vector<Beam> finished;
  const std::int64_t room = std::min(max_new_tokens, cache_.capacity() - P);
  // Tokens each beam proposes: whisper's beam_size + 1; for joint decoding a wider pre-beam.
  const std::size_t proposals = static_cast<std::size_t>(joint ? std::max<std::int64_t>(beam_size + 1, 8) : beam_size + 1);
  for (std::int64_t step = 0; step < room && static_cast<std::int64_t>(finished.size()) < beam_size; ++step) {
    std::map<std::vector<std::int32_t>, std::pair<Beam, std::int64_t>> candidates;  // sequence -> (candidate, source beam)
    const std::int64_t live = step == 0 ? 1 : beam_size;  // at the first step every beam is the prompt
    for (std::int64_t b = 0; b < live; ++b) {
      std::vector<float>& row = rows[static_cast<std::size_t>(b)];
      const Beam& beam = beams[static_cast<std::size_t>(b)];
      filter(row, beam.tokens, timestamps);
      const std::vector<double> lp = log_softmax_row(row);
      std::vector<std::int32_t> ids(lp.size());
      std::iota(ids.begin(), ids.end(), 0);
      const auto k = static_cast<std::ptrdiff_t>(std::min(proposals, ids.size()));
      std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](std::int32_t a, std::int32_t z) {
        return lp[static_cast<std::size_t>(a)] != lp[static_cast<std::size_t>(z)] ? lp[static_cast<std::size_t>(a)] > lp[static_cast<std::size_t>(z)] : a < z;
      });
      for (std::ptrdiff_t j = 0; j < k; ++j) {
        const std::int32_t id = ids[static_cast<std::size_t>(j)];
        Beam c;
        c.tokens = beam.tokens;
        c.tokens.push_back(id);
        c.sum_logprob = beam.sum_logprob + lp[static_cast<std::size_t>(id)];
        c.score = c.sum_logprob;
        if (joint) {
          if (id == tok_.eot) {
            c.score = joint_score(c.sum_logprob, ctc->final_score(beam.ctc));
          } else {
            c.ctc = id < tok_.eot && id != tok_.no_speech ? ctc->extend(beam.ctc, id) : beam.ctc;
            c.score = joint_score(c.sum_logprob, c.ctc.score);
          }
        }
        std::vector<std::int32_t> key = c.tokens;
        candidates.insert_or_assign(std::move(key), std::make_pair(std::move(c), b));
      }
    }
    std::vector<std::pair<Beam, std::int64_t>> ranked;
    for (auto& [seq, cand] : candidates) ranked.push_back(std::move(cand));
    std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& z) { return a.first.score > z.first.score; });
    std::vector<Beam> next;
    std::vector<std::int64_t> parents;
    std::vector<Beam> newly;
    for (auto& [cand, src] : ranked) {
      if (cand.tokens.back() == tok_.eot) {
        cand.tokens.pop_back();
        newly.push_back(std::move(cand));
        continue;
      }
      next.push_back(std::move(cand));
      parents.push_back(src);
      if (static_cast<std::int64_t>(next.size()) == beam_size) break;
    }
    for (Beam& f : newly)
      if (static_cast<std::int64_t>(finished.size()) < beam_size) finished.push_back(std::move(f));
    while (!next.empty() && static_cast<std::int64_t>(next.size()) < beam_size) {  // fewer live candidates than beams
      next.push_back(next.front());
      parents.push_back(parents.front());
    }
    if (next.empty()) break;
    if (static_cast<std::int64_t>(finished.size()) >= beam_size || step + 1 == room) {
      beams = std::move(next);
      break;
    }
    cache_.reorder(parents);
    std::vector<std::int64_t> ids, slots;
    for (std::int64_t b = 0; b < beam_size; ++b) {
      ids.push_back(next[static_cast<std::size_t>(b)].tokens.back());
      slots.push_back(b);
    }
    const Tensor logits = model_.decode_cached(Tensor::from_ints(ids, {beam_size, 1}), slots, cache_);  // (B, V)
    for (std::int64_t b = 0; b < beam_size; ++b) rows[static_cast<std::size_t>(b)] = row_of(logits, b);
    beams = std::move(next);
  }
  // Too few finished within the length: the live beams count as candidates (whisper's finalize),
  // with joint decoding scored as texts that end there.
  for (Beam& b : beams)
    if (static_cast<std::int64_t>(finished.size()) < beam_size) {
      if (joint) b.score = joint_score(b.sum_logprob, ctc->final_score(b.ctc));
      finished.push_back(std::move(b));
    }
  // MaximumLikelihoodRanker without a length penalty: the sum over the length; joint: the sum.
  const auto rank = [&](const Beam& b) {
    return joint ? b.score : b.sum_logprob / static_cast<double>(std::max<std::size_t>(b.tokens.size(), 1));
  };
  const auto best = std::max_element(finished.begin(), finished.end(), [&](const Beam& a, const Beam& z) { return rank(a) < rank(z); });
  WindowResult r;
  r.tokens = best->tokens;
  r.sum_logprob = best->sum_logprob;
  return r;
}

std::vector<float> Transcriber::ctc_log_probs() const {
  TFM_CHECK(encoded_.defined(), "transcribe", "no window has been encoded");
  NoGradGuard no_grad;
  const Tensor lp = contiguous(log_softmax(model_.head(encoded_), -1));  // (1, frames, V)
  const float* p = lp.data<float>();
  return std::vector<float>(p, p + lp.numel());
}

void Transcriber::encode(const Tensor& features) {
  TFM_CHECK(features.dim() == 2 && features.size(0) == model_.config().num_mel_bins, "transcribe", "features must be (",
            model_.config().num_mel_bins, ", frames), got ", shape_str(features.shape()));
  ModelInputs in;
  in.input_features = reshape(features, {1, features.size(0), features.size(1)});
  NoGradGuard no_grad;
  encoded_ = model_.encode(in);
  model_.encoder_output_to_cache(encoded_, cache_, 0);
}

std::vector<std::int32_t> Transcriber::prompt(const std::vector<std::int32_t>& previous, const std::string& language,
                                              const std::string& task, bool timestamps) const {
  std::vector<std::int32_t> p;
  if (!previous.empty() && tok_.sot_prev >= 0) {
    p.push_back(tok_.sot_prev);
    const std::size_t keep = static_cast<std::size_t>(model_.config().max_positions / 2 - 1);
    p.insert(p.end(), previous.end() - static_cast<std::ptrdiff_t>(std::min(keep, previous.size())), previous.end());
  }
  p.push_back(tok_.sot);
  if (tok_.multilingual) {
    const std::int32_t lang = tok_.language(language.empty() ? "en" : language);
    TFM_CHECK(lang >= 0, "transcribe", "the vocabulary has no language '", language, "'");
    p.push_back(lang);
    TFM_CHECK(task == "transcribe" || task == "translate", "transcribe", "task must be transcribe or translate, got '", task, "'");
    const std::int32_t t = task == "translate" ? tok_.translate : tok_.transcribe;
    TFM_CHECK(t >= 0, "transcribe", "the vocabulary has no <|", task, "|> token");
    p.push_back(t);
  } else {
    TFM_CHECK(task == "transcribe", "transcribe", "an English-only model cannot translate");
    TFM_CHECK(language.empty() || language == "en", "transcribe", "an English-only model cannot transcribe '", language, "'");
  }
  if (!timestamps) p.push_back(tok_.no_timestamps);
  return p;
}

std::pair<std::string, double> Transcriber::detect_language(const Tensor& features) {
  TFM_CHECK(tok_.multilingual && !tok_.languages.empty(), "transcribe", "an English-only model has no language to detect");
  encode(features);
  cache_.reset(0);
  const std::vector<std::int32_t> sot{tok_.sot};
  const Tensor logits = model_.decode_cached(id_tensor(sot), {0}, cache_);
  std::vector<float> row = row_of(logits, 0), masked(row.size(), kNegInf);
  for (const auto& [code, id] : tok_.languages) masked[static_cast<std::size_t>(id)] = row[static_cast<std::size_t>(id)];
  const std::vector<double> lp = log_softmax_row(masked);
  const std::int32_t best = argmax_row(masked);
  return {tok_.language_code(best), std::exp(lp[static_cast<std::size_t>(best)])};
}

WindowResult Transcriber::decode_window(const Tensor& features, const std::vector<std::int32_t>& prompt, bool timestamps,
                                        double temperature, std::int64_t max_new_tokens, std::uint64_t seed,
                                        std::int64_t beam_size, double ctc_weight) {
  encode(features);
  return decode_encoded(prompt, timestamps, temperature, max_new_tokens, seed, beam_size, ctc_weight);
}

WindowResult Transcriber::decode_encoded(const std::vector<std::int32_t>& prompt, bool timestamps, double temperature,
                                         std::int64_t max_new_tokens, std::uint64_t seed, std::int64_t beam_size,
                                         double ctc_weight) {
  const std::int64_t P = static_cast<std::int64_t>(prompt.size());
  TFM_CHECK(P >= 1 && P < cache_.capacity(), "transcribe", "a prompt of ", P, " tokens does not fit the decoder's ",
            cache_.capacity(), " positions");
  TFM_CHECK(beam_size >= 1, "transcribe", "beam size must be at least 1, got ", beam_size);
  cache_.reset(0);
  const Tensor all = model_.decode_cached(id_tensor(prompt), {0}, cache_, true);  // (1, P, V)
  double no_speech = 0;
  const auto sot_at = std::find(prompt.begin(), prompt.end(), tok_.sot) - prompt.begin();
  if (tok_.no_speech >= 0) no_speech = std::exp(log_softmax_row(row_of(all, sot_at))[static_cast<std::size_t>(tok_.no_speech)]);
  WindowResult r;
  if (temperature == 0 && (beam_size > 1 || ctc_weight > 0)) {
    r = beam_search(prompt, all, timestamps, max_new_tokens, beam_size, ctc_weight);
  } else {
    std::vector<float> row = row_of(all, P - 1);
    std::uint64_t rng = seed * 0x9E3779B97F4A7C15ull + 0x1234567ull;
    const std::int64_t room = std::min(max_new_tokens, cache_.capacity() - P);
    for (std::int64_t i = 0; i < room; ++i) {
      filter(row, r.tokens, timestamps);
      const std::int32_t next = temperature > 0 ? sample_row(row, temperature, rng) : argmax_row(row);
      r.sum_logprob += log_softmax_row(row)[static_cast<std::size_t>(next)];
      if (next == tok_.eot) break;
      r.tokens.push_back(next);
      if (i + 1 == room) break;
      const std::vector<std::int32_t> one{next};
      row = row_of(model_.decode_cached(id_tensor(one), {0}, cache_), 0);
    }
  }
  r.temperature = temperature;
  r.no_speech_prob = no_speech;
  finish(r);
  return r;
}

// ---- long-form transcription ---------------------------------------------------------------
Transcript Transcriber::transcribe(const Audio& audio, const TranscribeOptions& o,
                                   const std::function<void(const TranscriptSegment&)>& on_segment,
                                   const std::function<void(double, double)>& on_progress) {
  const AudioFeatureExtractor& fx = fx_;
  const LogMelOptions& mo = fx.options();
  TFM_CHECK(audio.sample_rate == mo.sample_rate, "transcribe", "audio at ", audio.sample_rate, " Hz; the model hears ",
            mo.sample_rate, " Hz (read it with that rate)");
  TFM_CHECK(!o.temperatures.empty(), "transcribe", "no temperature to decode at");
  const std::int64_t window = fx.window_frames(), hop = mo.hop;
  // The whole file's spectrogram with a window of silence behind it (whisper's padding), so
  // every window is a slice and the clamp's maximum is the file's.
  std::vector<float> padded(audio.samples);
  padded.resize(audio.samples.size() + static_cast<std::size_t>(fx.window_samples()), 0.0f);
  const Tensor mel = log_mel_spectrogram(padded, mo);  // (n_mels, frames)
  const std::int64_t content = static_cast<std::int64_t>(audio.samples.size()) / hop;
  const double frame_seconds = static_cast<double>(hop) / static_cast<double>(mo.sample_rate);

  Transcript out;
  out.seconds = audio.seconds();
  std::string language = o.language == "auto" ? "" : o.language;
  if (tok_.multilingual && language.empty()) {
    language = detect_language(contiguous(slice(mel, 1, 0, window))).first;
  }
  out.language = language.empty() ? "en" : language;

  // OpenAI's initial_prompt: " " + the text, as if an earlier window had said it.
  std::vector<std::int32_t> all_tokens;
  if (!o.initial_prompt.empty()) {
    const std::size_t a = o.initial_prompt.find_first_not_of(" \t\n"), z = o.initial_prompt.find_last_not_of(" \t\n");
    if (a != std::string::npos) all_tokens = text_.encode(" " + o.initial_prompt.substr(a, z - a + 1));
  }
  std::size_t prompt_reset_since = 0;
  std::int64_t seek = 0;
  double last_speech = 0;  // where the last word ended (word timestamps)
  while (seek < content) {
    const std::int64_t segment_size = std::min(window, content - seek);
    const double time_offset = static_cast<double>(seek) * frame_seconds;
    const double segment_duration = static_cast<double>(segment_size) * frame_seconds;
    const Tensor features = contiguous(slice(mel, 1, seek, seek + window));
    const std::vector<std::int32_t> previous(all_tokens.begin() + static_cast<std::ptrdiff_t>(prompt_reset_since), all_tokens.end());
    const std::vector<std::int32_t> p = prompt(o.condition_on_previous_text ? previous : std::vector<std::int32_t>{},
                                               out.language, o.task, o.timestamps);
    // The window's encoder runs once; every temperature and draw decodes against its keys/values.
    encode(features);
    WindowResult r;
    for (double t : o.temperatures) {
      // Above 0: best_of samples, the likeliest per token kept (whisper's ranking without beams).
      const std::int64_t draws = t > 0 ? std::max<std::int64_t>(o.best_of, 1) : 1;
      for (std::int64_t k = 0; k < draws; ++k) {
        const std::uint64_t seed = o.seed + static_cast<std::uint64_t>(seek) * 0x9E3779B97F4A7C15ull + static_cast<std::uint64_t>(k);
        WindowResult w = decode_encoded(p, o.timestamps, t, o.max_new_tokens, seed, o.beam_size, o.ctc_weight);
        const auto per_token = [](const WindowResult& x) {
          return x.sum_logprob / static_cast<double>(std::max<std::size_t>(x.tokens.size(), 1));
        };
        if (k == 0 || per_token(w) > per_token(r)) r = std::move(w);
      }
      bool fallback = (o.compression_ratio_threshold > 0 && r.compression_ratio > o.compression_ratio_threshold) ||
                      r.avg_logprob < o.logprob_threshold;
      if (r.no_speech_prob > o.no_speech_threshold && r.avg_logprob < o.logprob_threshold) fallback = false;  // silence
      if (!fallback) break;
    }
    if (r.no_speech_prob > o.no_speech_threshold && !(r.avg_logprob > o.logprob_threshold)) {
      seek += segment_size;  // silence: nothing to keep
      if (on_progress) on_progress(std::min(static_cast<double>(seek) * frame_seconds, out.seconds), out.seconds);
      continue;
    }
    const std::vector<std::int32_t>& tokens = r.tokens;
    const auto is_ts = [&](std::size_t i) { return tokens[i] >= tok_.timestamp_begin; };
    std::vector<TranscriptSegment> found;
    const auto add = [&](double start, double end, std::vector<std::int32_t> toks) {
      TranscriptSegment s;
      s.start = start;
      s.end = end;
      std::vector<std::int32_t> text;
      for (std::int32_t t : toks)
        if (t < tok_.eot) text.push_back(t);
      s.text = metrics::valid_utf8(text_.decode(text));
      s.tokens = std::move(toks);
      s.avg_logprob = r.avg_logprob;
      s.compression_ratio = r.compression_ratio;
      s.no_speech_prob = r.no_speech_prob;
      s.temperature = r.temperature;
      s.seek = time_offset;
      found.push_back(std::move(s));
    };
    const std::size_t n = tokens.size();
    const bool single_ending = n >= 2 && !is_ts(n - 2) && is_ts(n - 1);
    std::vector<std::size_t> cuts;  // where two timestamps meet: the second starts a segment
    for (std::size_t i = 1; i < n; ++i)
      if (is_ts(i - 1) && is_ts(i)) cuts.push_back(i);
    if (o.timestamps && !cuts.empty()) {
      if (single_ending) cuts.push_back(n);
      std::size_t last = 0;
      for (std::size_t cut : cuts) {
        const std::vector<std::int32_t> part(tokens.begin() + static_cast<std::ptrdiff_t>(last), tokens.begin() + static_cast<std::ptrdiff_t>(cut));
        const double start = static_cast<double>(part.front() - tok_.timestamp_begin) * kSecondsPerTimestamp;
        const double end = static_cast<double>(part.back() - tok_.timestamp_begin) * kSecondsPerTimestamp;
        add(time_offset + start, time_offset + end, part);
        last = cut;
      }
      if (single_ending) {
        seek += segment_size;
      } else {
        // The next window starts at the last segment's end (never where this one started).
        const std::int64_t last_pos = tokens[last - 1] - tok_.timestamp_begin;
        // (Whisper: last_pos x 2 frames; a timestamp step is 0.02 s whatever the frame rate.)
        const auto frames = static_cast<std::int64_t>(std::llround(static_cast<double>(last_pos) * kSecondsPerTimestamp / frame_seconds));
        seek += frames > 0 ? frames : segment_size;
      }
    } else {
      double duration = segment_duration;
      std::int32_t last_time = -1;
      for (std::size_t i = 0; i < n; ++i)
        if (is_ts(i)) last_time = tokens[i];
      if (last_time > tok_.timestamp_begin)
        duration = static_cast<double>(last_time - tok_.timestamp_begin) * kSecondsPerTimestamp;
      add(time_offset, time_offset + duration, tokens);
      seek += segment_size;
    }
    if (o.word_timestamps && !found.empty()) {
      add_word_timestamps(found, features, segment_size, out.language, o, last_speech);
      // The next window starts where the last word ended (whisper's rule with word timestamps).
      if (!single_ending) {
        double last_end = found.back().end;
        for (auto s = found.rbegin(); s != found.rend(); ++s)
          if (!s->words.empty()) {
            last_end = s->words.back().end;
            break;
          }
        if (last_end > time_offset) seek = std::llround(last_end / frame_seconds);
      }
    }
    for (TranscriptSegment& s : found) {
      // Empty segments (a timestamp pair with nothing between) are dropped, as whisper does.
      if (s.start == s.end || s.text.find_first_not_of(" \t\n") == std::string::npos) continue;
      all_tokens.insert(all_tokens.end(), s.tokens.begin(), s.tokens.end());
      out.text += s.text;
      if (on_segment) on_segment(s);
      out.segments.push_back(std::move(s));
    }
    if (!o.condition_on_previous_text || r.temperature > 0.5) prompt_reset_since = all_tokens.size();
    if (on_progress) on_progress(std::min(static_cast<double>(seek) * frame_seconds, out.seconds), out.seconds);
  }
  return out;
}

}  // namespace tfm
