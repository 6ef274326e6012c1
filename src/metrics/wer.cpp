// Word and character error rates as jiwer defines them (tfm/metrics.h): the minimum number of
// substitutions, deletions and insertions turning each reference into its hypothesis, summed
// over the corpus and divided by the reference's words (or characters). jiwer's default
// transforms: words are runs between spaces after collapsing repeated spaces and stripping the
// ends; characters are the code points of the stripped text, spaces included.
#include <unicode/unorm2.h>

#include <algorithm>

#include "metrics/text.h"
#include "tfm/error.h"
#include "tfm/metrics.h"

namespace tfm::metrics {
namespace {

using detail::decode_utf8;
using detail::encode_utf8;

// Levenshtein distance with the edit kinds of one optimal alignment (jiwer's counts come from
// rapidfuzz's alignment; any optimal one has the same total).
template <class T>
ErrorCounts align(const std::vector<T>& ref, const std::vector<T>& hyp) {
  const std::size_t n = ref.size(), m = hyp.size();
  std::vector<std::size_t> d((n + 1) * (m + 1));
  const auto at = [&](std::size_t i, std::size_t j) -> std::size_t& { return d[i * (m + 1) + j]; };
  for (std::size_t i = 0; i <= n; ++i) at(i, 0) = i;
  for (std::size_t j = 0; j <= m; ++j) at(0, j) = j;
  for (std::size_t i = 1; i <= n; ++i)
    for (std::size_t j = 1; j <= m; ++j)
      at(i, j) = std::min({at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + (ref[i - 1] == hyp[j - 1] ? 0 : 1)});
  ErrorCounts c;
  c.reference = static_cast<std::int64_t>(n);
  std::size_t i = n, j = m;
  while (i > 0 || j > 0) {
    if (i > 0 && j > 0 && at(i, j) == at(i - 1, j - 1) + (ref[i - 1] == hyp[j - 1] ? 0 : 1)) {
      if (ref[i - 1] == hyp[j - 1]) ++c.hits; else ++c.substitutions;
      --i, --j;
    } else if (i > 0 && at(i, j) == at(i - 1, j) + 1) {
      ++c.deletions, --i;
    } else {
      ++c.insertions, --j;
    }
  }
  return c;
}

std::u32string nfkc(std::u32string_view s) {
  UErrorCode err = U_ZERO_ERROR;
  const UNormalizer2* n = unorm2_getNFKCInstance(&err);
  TFM_CHECK(U_SUCCESS(err), "wer", "ICU has no NFKC normalizer");
  std::u16string in;
  for (char32_t c : s) {
    if (c >= 0x10000) {
      in += static_cast<char16_t>(0xD800 + ((c - 0x10000) >> 10));
      in += static_cast<char16_t>(0xDC00 + ((c - 0x10000) & 0x3FF));
    } else {
      in += static_cast<char16_t>(c);
    }
  }
  std::u16string out(in.size() * 4 + 16, u'\0');
  const int32_t len = unorm2_normalize(n, reinterpret_cast<const UChar*>(in.data()), static_cast<int32_t>(in.size()),
                                       reinterpret_cast<UChar*>(out.data()), static_cast<int32_t>(out.size()), &err);
  TFM_CHECK(U_SUCCESS(err), "wer", "NFKC normalisation failed");
  std::u32string r;
  for (int32_t k = 0; k < len; ++k) {
    const char16_t u = out[static_cast<std::size_t>(k)];
    if (u >= 0xD800 && u < 0xDC00 && k + 1 < len) {
      r += static_cast<char32_t>(0x10000 + ((u - 0xD800) << 10) + (out[static_cast<std::size_t>(++k)] - 0xDC00));
    } else {
      r += static_cast<char32_t>(u);
    }
  }
  return r;
}

// Removes [..] / <..> spans and (..) spans, as Whisper's BasicTextNormalizer's regexes do.
std::u32string drop_bracketed(const std::u32string& s) {
  std::u32string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char32_t c = s[i];
    if (c == U'[' || c == U'<' || c == U'(') {
      const std::size_t close = c == U'(' ? s.find(U')', i + 1) : s.find_first_of(U"]>", i + 1);
      const bool inner_ok = c != U'(' || close > i + 1;  // "\(([^)]+?)\)" needs one character inside
      if (close != std::u32string::npos && inner_ok) {
        i = close;
        continue;
      }
    }
    out += c;
  }
  return out;
}

// A space-normalised string: runs of spaces as one, ends stripped (jiwer's RemoveMultipleSpaces
// and Strip; with `basic`, any whitespace run is a space, as the normaliser's \s+ makes it).
std::u32string collapse_spaces(std::u32string_view s, bool any_whitespace) {
  std::u32string out;
  bool pending = false;
  for (char32_t c : s) {
    const bool space = any_whitespace ? detail::is_py_space(c) : c == U' ';
    if (space) {
      pending = !out.empty();
      continue;
    }
    if (pending) out += U' ';
    pending = false;
    out += c;
  }
  return std::u32string(detail::py_strip(out));
}

}  // namespace

std::string normalize_transcript(std::string_view text, TranscriptNormalizer how) {
  std::u32string s = decode_utf8(text);
  if (how == TranscriptNormalizer::basic) {
    s = drop_bracketed(detail::py_lower(s));
    std::u32string kept;
    for (char32_t c : nfkc(s)) {
      const bool mark = (U_GET_GC_MASK(static_cast<UChar32>(c)) & U_GC_M_MASK) != 0;
      kept += mark || detail::is_symbol(c) || detail::is_punctuation(c) ? U' ' : c;
    }
    return encode_utf8(collapse_spaces(kept, true));
  }
  return encode_utf8(s);
}

ErrorCounts word_errors(std::string_view reference, std::string_view hypothesis) {
  const auto words = [](std::string_view t) {
    std::vector<std::u32string> w;
    const std::u32string s = collapse_spaces(decode_utf8(t), false);
    std::size_t at = 0;
    while (at < s.size()) {
      const std::size_t end = std::min(s.find(U' ', at), s.size());
      w.push_back(s.substr(at, end - at));
      at = end + 1;
    }
    return w;
  };
  return align(words(reference), words(hypothesis));
}

ErrorCounts char_errors(std::string_view reference, std::string_view hypothesis) {
  const auto chars = [](std::string_view t) {
    const std::u32string text = decode_utf8(t);
    const std::u32string_view s = detail::py_strip(text);
    return std::vector<char32_t>(s.begin(), s.end());
  };
  return align(chars(reference), chars(hypothesis));
}

ErrorRates error_rates(const std::vector<std::string>& references, const std::vector<std::string>& hypotheses,
                       TranscriptNormalizer how) {
  TFM_CHECK(references.size() == hypotheses.size(), "wer", references.size(), " references but ", hypotheses.size(),
            " hypotheses");
  ErrorRates r;
  for (std::size_t i = 0; i < references.size(); ++i) {
    const std::string ref = normalize_transcript(references[i], how), hyp = normalize_transcript(hypotheses[i], how);
    TFM_CHECK(ref.find_first_not_of(' ') != std::string::npos, "wer", "reference ", i + 1,
              " is empty (after normalisation): an error rate needs reference words");
    r.words += word_errors(ref, hyp);
    r.chars += char_errors(ref, hyp);
  }
  return r;
}

ErrorCounts& ErrorCounts::operator+=(const ErrorCounts& o) {
  hits += o.hits, substitutions += o.substitutions, deletions += o.deletions, insertions += o.insertions;
  reference += o.reference;
  return *this;
}

double ErrorCounts::rate() const {
  return reference > 0 ? static_cast<double>(substitutions + deletions + insertions) / static_cast<double>(reference) : 0.0;
}

}  // namespace tfm::metrics
