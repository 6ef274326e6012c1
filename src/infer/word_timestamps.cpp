// Word timestamps as openai-whisper computes them (timing.py: find_alignment, merge_punctuations,
// add_word_timestamps; tokenizer.py: split_to_word_tokens): the text is aligned with the audio
// through the cross-attention of the alignment heads by dynamic time warping. The reference
// (tools/reference/ref_whisper.py, word_alignment) follows the same code.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "metrics/text.h"
#include "tfm/autograd.h"
#include "tfm/error.h"
#include "tfm/ops.h"
#include "tfm/transcribe.h"

namespace tfm {
namespace {

constexpr std::int64_t kMedianFilterWidth = 7;  // whisper's medfilt_width (WhisperConfig.median_filter_width)
const char kPunctuation[] = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";  // Python's string.punctuation

// Python's `needle in haystack` for strings: a substring test, true for the empty needle.
bool contains(std::string_view haystack, std::string_view needle) { return haystack.find(needle) != std::string_view::npos; }

// Python's str.strip(): whitespace trimmed on both ends (ASCII whitespace, the only kind a
// token's text starts or ends with here).
std::string strip(const std::string& s) {
  const std::size_t a = s.find_first_not_of(" \t\n\r\f\v");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t\n\r\f\v") - a + 1);
}

// whisper's median_filter along each row of a (rows, n) matrix: reflect-padded by width / 2,
// the median of each window (the middle of the sorted window: the width is odd).
void median_filter_rows(std::vector<double>& m, std::int64_t rows, std::int64_t n, std::int64_t width) {
  const std::int64_t pad = width / 2;
  if (n <= pad) return;
  std::vector<double> padded(static_cast<std::size_t>(n + 2 * pad)), window(static_cast<std::size_t>(width));
  for (std::int64_t r = 0; r < rows; ++r) {
    double* row = m.data() + r * n;
    for (std::int64_t k = 0; k < n + 2 * pad; ++k) {
      std::int64_t src = k - pad;
      if (src < 0) src = -src;                   // reflect: the edge itself is not repeated
      if (src >= n) src = 2 * (n - 1) - src;
      padded[static_cast<std::size_t>(k)] = row[src];
    }
    for (std::int64_t k = 0; k < n; ++k) {
      std::copy(padded.begin() + k, padded.begin() + k + width, window.begin());
      std::nth_element(window.begin(), window.begin() + pad, window.end());
      row[k] = window[static_cast<std::size_t>(pad)];
    }
  }
}

std::u32string code_points(const std::string& s) { return metrics::detail::decode_utf8(s); }

}  // namespace

std::vector<std::pair<std::int64_t, std::int64_t>> dtw_path(const std::vector<double>& x, std::int64_t N, std::int64_t M) {
  TFM_CHECK(N >= 1 && M >= 1 && static_cast<std::int64_t>(x.size()) == N * M, "dtw", "a ", N, " x ", M,
            " cost matrix needs ", N * M, " numbers, got ", x.size());
  // whisper keeps the accumulated cost in float32 (the ties it breaks are float32 ties).
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> cost(static_cast<std::size_t>((N + 1) * (M + 1)), inf);
  std::vector<signed char> trace(static_cast<std::size_t>((N + 1) * (M + 1)), -1);
  const auto at = [M](std::int64_t i, std::int64_t j) { return static_cast<std::size_t>(i * (M + 1) + j); };
  cost[0] = 0;
  for (std::int64_t j = 1; j <= M; ++j)
    for (std::int64_t i = 1; i <= N; ++i) {
      const float c0 = cost[at(i - 1, j - 1)], c1 = cost[at(i - 1, j)], c2 = cost[at(i, j - 1)];
      float c;
      signed char t;
      if (c0 < c1 && c0 < c2) c = c0, t = 0;
      else if (c1 < c0 && c1 < c2) c = c1, t = 1;
      else c = c2, t = 2;
      cost[at(i, j)] = static_cast<float>(x[static_cast<std::size_t>((i - 1) * M + (j - 1))] + static_cast<double>(c));
      trace[at(i, j)] = t;
    }
  for (std::int64_t j = 0; j <= M; ++j) trace[at(0, j)] = 2;
  for (std::int64_t i = 0; i <= N; ++i) trace[at(i, 0)] = 1;
  std::vector<std::pair<std::int64_t, std::int64_t>> path;
  std::int64_t i = N, j = M;
  while (i > 0 || j > 0) {
    path.emplace_back(i - 1, j - 1);
    switch (trace[at(i, j)]) {
      case 0: --i, --j; break;
      case 1: --i; break;
      default: --j; break;
    }
  }
  std::reverse(path.begin(), path.end());
  return path;
}

void merge_punctuations(std::vector<WordTiming>& a, const std::string& prepended, const std::string& appended) {
  if (a.size() < 2) return;
  // Leading marks, from the end: " (" joins the word after it.
  std::int64_t i = static_cast<std::int64_t>(a.size()) - 2, j = static_cast<std::int64_t>(a.size()) - 1;
  while (i >= 0) {
    WordTiming& prev = a[static_cast<std::size_t>(i)];
    WordTiming& next = a[static_cast<std::size_t>(j)];
    if (!prev.word.empty() && prev.word[0] == ' ' && contains(prepended, strip(prev.word))) {
      next.word = prev.word + next.word;
      next.tokens.insert(next.tokens.begin(), prev.tokens.begin(), prev.tokens.end());
      prev.word.clear();
      prev.tokens.clear();
    } else {
      j = i;
    }
    --i;
  }
  // Trailing marks, from the start: "," joins the word before it.
  std::size_t p = 0;
  for (std::size_t k = 1; k < a.size(); ++k) {
    WordTiming& prev = a[p];
    WordTiming& next = a[k];
    if ((prev.word.empty() || prev.word.back() != ' ') && contains(appended, next.word)) {
      prev.word += next.word;
      prev.tokens.insert(prev.tokens.end(), next.tokens.begin(), next.tokens.end());
      next.word.clear();
      next.tokens.clear();
    } else {
      p = k;
    }
  }
}

std::pair<std::vector<std::string>, std::vector<std::vector<std::int32_t>>> Transcriber::split_words(
    const std::vector<std::int32_t>& tokens, const std::string& language) const {
  // On character boundaries: tokens join until their text has no incomplete UTF-8 character
  // (a U+FFFD that the whole text does not have at that place).
  const std::u32string full = code_points(text_.decode(tokens));
  std::vector<std::string> pieces;
  std::vector<std::vector<std::int32_t>> piece_tokens;
  std::vector<std::int32_t> current;
  std::size_t offset = 0;
  for (std::int32_t t : tokens) {
    current.push_back(t);
    const std::string decoded = text_.decode(current);
    const std::u32string cp = code_points(decoded);
    const std::size_t bad = cp.find(U'\uFFFD');
    if (bad == std::u32string::npos || (offset + bad < full.size() && full[offset + bad] == U'\uFFFD')) {
      pieces.push_back(decoded);
      piece_tokens.push_back(current);
      current.clear();
      offset += cp.size();
    }
  }
  static const std::vector<std::string> unspaced = {"zh", "ja", "th", "lo", "my", "yue"};
  if (std::find(unspaced.begin(), unspaced.end(), language) != unspaced.end()) return {pieces, piece_tokens};
  // Else words start at a space, a punctuation mark or a special token.
  std::vector<std::string> words;
  std::vector<std::vector<std::int32_t>> word_tokens;
  for (std::size_t k = 0; k < pieces.size(); ++k) {
    const bool special = piece_tokens[k][0] >= tok_.eot;
    const bool with_space = !pieces[k].empty() && pieces[k][0] == ' ';
    const bool punctuation = contains(kPunctuation, strip(pieces[k]));
    if (special || with_space || punctuation || words.empty()) {
      words.push_back(pieces[k]);
      word_tokens.push_back(piece_tokens[k]);
    } else {
      words.back() += pieces[k];
      word_tokens.back().insert(word_tokens.back().end(), piece_tokens[k].begin(), piece_tokens[k].end());
    }
  }
  return {words, word_tokens};
}

std::vector<WordTiming> Transcriber::align_words(const Tensor& features, const std::vector<std::int32_t>& text_tokens,
                                                 std::int64_t num_frames, const std::string& language,
                                                 const std::string& task) {
  if (text_tokens.empty()) return {};
  const ModelConfig& c = model_.config();
  // The decoder's input: the start sequence, <|notimestamps|>, the text, <|endoftext|>.
  // (An English-only vocabulary has no language tokens: its start sequence is <|startoftranscript|>.)
  std::vector<std::int32_t> tokens = prompt({}, tok_.multilingual ? language : std::string(), task, false);
  const auto n_sot = static_cast<std::int64_t>(tokens.size()) - 1;  // the start sequence before <|notimestamps|>
  tokens.insert(tokens.end(), text_tokens.begin(), text_tokens.end());
  tokens.push_back(tok_.eot);
  const auto T = static_cast<std::int64_t>(tokens.size());
  TFM_CHECK(T <= c.max_positions, "word timestamps", "the window's ", text_tokens.size(), " text tokens do not fit the decoder's ",
            c.max_positions, " positions with the start sequence");
  std::vector<std::int64_t> ids(tokens.begin(), tokens.end());
  ModelInputs in;
  in.input_features = unsqueeze(features, 0);
  in.decoder_input_ids = Tensor::from_ints(ids, {1, T});
  std::vector<AttentionMap> maps;
  Tensor logits;
  {
    NoGradGuard no_grad;
    model_.set_training(false);
    model_.set_attention_capture(&maps);
    try {
      logits = contiguous(model_.forward(in).logits);  // (1, T, V)
    } catch (...) {
      model_.set_attention_capture(nullptr);
      throw;
    }
    model_.set_attention_capture(nullptr);
  }
  // Each text token's probability where it was read (softmax over the text tokens below <|endoftext|>).
  const std::int64_t V = logits.size(2);
  const std::vector<float> lg = logits.to_floats();
  std::vector<double> probs(text_tokens.size());
  for (std::size_t k = 0; k < text_tokens.size(); ++k) {
    const float* row = lg.data() + (n_sot + static_cast<std::int64_t>(k)) * V;
    const double mx = *std::max_element(row, row + tok_.eot);
    double z = 0;
    for (std::int32_t v = 0; v < tok_.eot; ++v) z += std::exp(static_cast<double>(row[v]) - mx);
    probs[k] = std::exp(static_cast<double>(row[text_tokens[k]]) - mx) / z;
  }
  // The alignment heads (generation_config.json), else every head of the decoder's second half.
  std::vector<const AttentionMap*> cross;
  for (const AttentionMap& m : maps)
    if (m.stack == "decoder" && m.kind == "cross") cross.push_back(&m);
  TFM_CHECK(!cross.empty(), "word timestamps", "the decoder recorded no cross-attention");
  std::vector<std::pair<std::int64_t, std::int64_t>> heads = alignment_heads_;
  const auto L = static_cast<std::int64_t>(cross.size());
  const std::int64_t H = cross[0]->weights.size(1);
  if (heads.empty())
    for (std::int64_t l = L / 2; l < L; ++l)
      for (std::int64_t h = 0; h < H; ++h) heads.emplace_back(l, h);
  const std::int64_t S = cross[0]->weights.size(3);
  const std::int64_t F = std::min<std::int64_t>(std::max<std::int64_t>(num_frames / 2, 1), S);
  std::vector<double> matrix(static_cast<std::size_t>(T * F), 0.0);
  for (const auto& [l, h] : heads) {
    TFM_CHECK(l < L && h < H, "word timestamps", "alignment head [", l, ", ", h, "] is not among the decoder's ", L,
              " layers x ", H, " heads");
    const Tensor w = contiguous(cross[static_cast<std::size_t>(l)]->weights);  // (1, H, T, S)
    const float* base = w.data<float>() + h * T * S;
    // The softmax over the first F positions is the full softmax's slice renormalised.
    std::vector<double> m(static_cast<std::size_t>(T * F));
    for (std::int64_t t = 0; t < T; ++t) {
      double z = 0;
      for (std::int64_t f = 0; f < F; ++f) z += base[t * S + f];
      for (std::int64_t f = 0; f < F; ++f) m[static_cast<std::size_t>(t * F + f)] = base[t * S + f] / z;
    }
    // Standardised over the tokens (population std), per time position.
    for (std::int64_t f = 0; f < F; ++f) {
      double mean = 0, var = 0;
      for (std::int64_t t = 0; t < T; ++t) mean += m[static_cast<std::size_t>(t * F + f)];
      mean /= static_cast<double>(T);
      for (std::int64_t t = 0; t < T; ++t) var += std::pow(m[static_cast<std::size_t>(t * F + f)] - mean, 2);
      const double sd = std::sqrt(var / static_cast<double>(T));
      for (std::int64_t t = 0; t < T; ++t) m[static_cast<std::size_t>(t * F + f)] = (m[static_cast<std::size_t>(t * F + f)] - mean) / sd;
    }
    median_filter_rows(m, T, F, kMedianFilterWidth);
    for (std::size_t k = 0; k < m.size(); ++k) matrix[k] += m[k] / static_cast<double>(heads.size());
  }
  // The path through the rows of <|notimestamps|> and the text (not the start sequence or the end).
  const std::int64_t rows = T - 1 - n_sot;
  std::vector<double> negative(static_cast<std::size_t>(rows * F));
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t f = 0; f < F; ++f)
      negative[static_cast<std::size_t>(r * F + f)] = -matrix[static_cast<std::size_t>((n_sot + r) * F + f)];
  const auto path = dtw_path(negative, rows, F);

  std::vector<std::int32_t> with_end = text_tokens;
  with_end.push_back(tok_.eot);
  auto [words, word_tokens] = split_words(with_end, language);
  if (word_tokens.size() <= 1) return {};
  // A word starts where the path first reaches its first token (time of that step).
  // The encoder's positions are two feature frames each (its stem's stride): 20 ms in Whisper.
  const double positions_per_second = static_cast<double>(fx_.options().sample_rate) / static_cast<double>(2 * fx_.options().hop);
  std::vector<double> jump_times;
  for (std::size_t k = 0; k < path.size(); ++k)
    if (k == 0 || path[k].first != path[k - 1].first) jump_times.push_back(static_cast<double>(path[k].second) / positions_per_second);
  std::vector<std::size_t> bounds{0};
  for (std::size_t w = 0; w + 1 < word_tokens.size(); ++w) bounds.push_back(bounds.back() + word_tokens[w].size());
  std::vector<WordTiming> out;
  for (std::size_t w = 0; w + 1 < bounds.size(); ++w) {
    WordTiming t;
    t.word = words[w];
    t.tokens = word_tokens[w];
    t.start = jump_times.at(bounds[w]);
    t.end = jump_times.at(bounds[w + 1]);
    double sum = 0;
    for (std::size_t k = bounds[w]; k < bounds[w + 1]; ++k) sum += probs[k];
    t.probability = bounds[w + 1] > bounds[w] ? sum / static_cast<double>(bounds[w + 1] - bounds[w]) : 0.0;
    out.push_back(std::move(t));
  }
  return out;
}

namespace {
double round2(double x) { return std::round(x * 100.0) / 100.0; }
}  // namespace

void Transcriber::add_word_timestamps(std::vector<TranscriptSegment>& segments, const Tensor& features,
                                      std::int64_t num_frames, const std::string& language, const TranscribeOptions& o,
                                      double& last_speech) {
  if (segments.empty()) return;
  std::vector<std::vector<std::int32_t>> per_segment;
  std::vector<std::int32_t> text;
  for (const TranscriptSegment& s : segments) {
    per_segment.emplace_back();
    for (std::int32_t t : s.tokens)
      if (t < tok_.eot) per_segment.back().push_back(t);
    text.insert(text.end(), per_segment.back().begin(), per_segment.back().end());
  }
  std::vector<WordTiming> a = align_words(features, text, num_frames, language, o.task);
  // Durations: the median of the non-zero ones, at most 0.7 s; a word may last twice that.
  std::vector<double> durations;
  for (const WordTiming& w : a)
    if (w.end - w.start != 0) durations.push_back(w.end - w.start);
  double median = 0;
  if (!durations.empty()) {
    std::vector<double> d = durations;
    std::sort(d.begin(), d.end());
    median = d.size() % 2 ? d[d.size() / 2] : (d[d.size() / 2 - 1] + d[d.size() / 2]) / 2;
  }
  median = std::min(0.7, median);
  const double max_duration = median * 2;
  // Overlong words at sentence ends are cut to max_duration.
  if (!durations.empty()) {
    static const std::string marks = ".\u3002!\uff01?\uff1f";
    for (std::size_t i = 1; i < a.size(); ++i)
      if (a[i].end - a[i].start > max_duration) {
        if (contains(marks, a[i].word)) a[i].end = a[i].start + max_duration;
        else if (contains(marks, a[i - 1].word)) a[i].start = a[i].end - max_duration;
      }
  }
  merge_punctuations(a, o.prepend_punctuations, o.append_punctuations);
  const double time_offset = segments[0].seek;
  std::size_t wi = 0;
  for (std::size_t si = 0; si < segments.size(); ++si) {
    TranscriptSegment& seg = segments[si];
    std::size_t saved = 0;
    std::vector<WordTiming> words;
    while (wi < a.size() && saved < per_segment[si].size()) {
      const WordTiming& t = a[wi];
      if (!t.word.empty()) {
        WordTiming w = t;
        w.start = round2(time_offset + t.start);
        w.end = round2(time_offset + t.end);
        words.push_back(std::move(w));
      }
      saved += t.tokens.size();
      ++wi;
    }
    if (!words.empty()) {
      // After a pause, the first (and second) word may not take more than twice the median.
      if (words[0].end - last_speech > median * 4 &&
          (words[0].end - words[0].start > max_duration ||
           (words.size() > 1 && words[1].end - words[0].start > max_duration * 2))) {
        if (words.size() > 1 && words[1].end - words[1].start > max_duration) {
          const double boundary = std::max(words[1].end / 2, words[1].end - max_duration);
          words[0].end = words[1].start = boundary;
        }
        words[0].start = std::max(0.0, words[0].end - max_duration);
      }
      // The segment's start when the first word is too long, else the first word's start.
      if (seg.start < words[0].end && seg.start - 0.5 > words[0].start)
        words[0].start = std::max(0.0, std::min(words[0].end - median, seg.start));
      else
        seg.start = words[0].start;
      // The segment's end when the last word is too long, else the last word's end.
      if (seg.end > words.back().start && seg.end + 0.5 < words.back().end)
        words.back().end = std::max(words.back().start + median, seg.end);
      else
        seg.end = words.back().end;
      last_speech = seg.end;
    }
    seg.words = std::move(words);
  }
}

}  // namespace tfm
