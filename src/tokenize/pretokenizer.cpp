// Hand-written matcher for GPT-2's pre-tokenizer pattern. At each position the
// alternatives are tried in the pattern's order; the comments name the alternative.
#include "tokenize/pretokenizer.h"

#include "tokenize/unicode.h"

namespace tfm::tok {

using unicode::CharClass;

namespace {

struct Decoder {
  const unsigned char* p;
  std::size_t n;
  // Class of the code point at i and its byte length.
  CharClass at(std::size_t i, int& len) const {
    if (p[i] < 0x80) {
      len = 1;
      return static_cast<CharClass>(unicode::detail::ascii_class[p[i]]);
    }
    std::uint32_t cp;
    len = unicode::decode_utf8(p + i, n - i, cp);
    return unicode::classify(cp);
  }
};

}  // namespace

void gpt2_split(std::string_view text, std::vector<Span>& out) {
  const Decoder d{reinterpret_cast<const unsigned char*>(text.data()), text.size()};
  const std::size_t n = text.size();
  std::size_t i = 0;
  auto emit = [&](std::size_t b, std::size_t e) { out.push_back({static_cast<std::uint32_t>(b), static_cast<std::uint32_t>(e)}); };
  while (i < n) {
    const unsigned char c = d.p[i];
    // '(?:[sdmt]|ll|ve|re)
    if (c == '\'' && i + 1 < n) {
      const unsigned char c1 = d.p[i + 1];
      if (c1 == 's' || c1 == 'd' || c1 == 'm' || c1 == 't') {
        emit(i, i + 2);
        i += 2;
        continue;
      }
      if (i + 2 < n) {
        const unsigned char c2 = d.p[i + 2];
        if ((c1 == 'l' && c2 == 'l') || (c1 == 'v' && c2 == 'e') || (c1 == 'r' && c2 == 'e')) {
          emit(i, i + 3);
          i += 3;
          continue;
        }
      }
    }
    int len;
    CharClass k = d.at(i, len);
    std::size_t j = i + len;
    if (c == ' ' && j < n) {
      // " ?" then \p{L}+ | \p{N}+ | [^\s\p{L}\p{N}]+ when the next char starts one of them.
      int len1;
      const CharClass k1 = d.at(j, len1);
      if (k1 != CharClass::space) {
        k = k1;
        j += len1;
      }
    }
    if (k != CharClass::space) {
      //  ?\p{L}+ |  ?\p{N}+ |  ?[^\s\p{L}\p{N}]+ : extend the run greedily.
      while (j < n) {
        int l;
        if (d.at(j, l) != k) break;
        j += l;
      }
      emit(i, j);
      i = j;
      continue;
    }
    // \s+(?!\S) | \s+ : the maximal whitespace run, minus its last char when a non-space
    // follows (the lookahead backtracks one char), unless that leaves nothing.
    std::size_t last = i;
    while (j < n) {
      int l;
      if (d.at(j, l) != CharClass::space) break;
      last = j;
      j += l;
    }
    if (j < n && last > i) j = last;
    emit(i, j);
    i = j;
  }
}

const char* const kCjkPattern =
    "[\\x{4E00}-\\x{9FFF}\\x{3400}-\\x{4DBF}\\x{20000}-\\x{2A6DF}\\x{2A700}-\\x{2B73F}\\x{2B740}-\\x{2B81F}"
    "\\x{2B820}-\\x{2CEAF}\\x{F900}-\\x{FAFF}\\x{2F800}-\\x{2FA1F}]";

bool is_cjk_ideograph(std::uint32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) || (cp >= 0x20000 && cp <= 0x2A6DF) ||
         (cp >= 0x2A700 && cp <= 0x2B73F) || (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

void cjk_isolated_gpt2_split(std::string_view text, std::vector<Span>& out) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  std::size_t run = 0, i = 0;  // [run, i): text since the last ideograph
  auto flush = [&](std::size_t end) {
    if (end == run) return;
    const std::size_t first = out.size();
    gpt2_split(text.substr(run, end - run), out);
    for (std::size_t k = first; k < out.size(); ++k) {  // offsets into the whole text
      out[k].begin += static_cast<std::uint32_t>(run);
      out[k].end += static_cast<std::uint32_t>(run);
    }
  };
  while (i < text.size()) {
    std::uint32_t cp;
    const int l = unicode::decode_utf8(p + i, text.size() - i, cp);
    if (cp != unicode::kInvalid && is_cjk_ideograph(cp)) {
      flush(i);
      out.push_back({static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(i + l)});
      run = i + static_cast<std::size_t>(l);
    }
    i += static_cast<std::size_t>(l);
  }
  flush(text.size());
}

void whitespace_split(std::string_view text, std::vector<Span>& out) {
  const Decoder d{reinterpret_cast<const unsigned char*>(text.data()), text.size()};
  std::size_t i = 0;
  while (i < d.n) {
    int l;
    while (i < d.n && d.at(i, l) == CharClass::space) i += l;
    if (i >= d.n) break;
    std::size_t j = i;
    while (j < d.n && d.at(j, l) != CharClass::space) j += l;
    out.push_back({static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(j)});
    i = j;
  }
}

void codepoint_split(std::string_view text, std::vector<Span>& out) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  std::size_t i = 0;
  while (i < text.size()) {
    std::uint32_t cp;
    const int l = unicode::decode_utf8(p + i, text.size() - i, cp);
    out.push_back({static_cast<std::uint32_t>(i), static_cast<std::uint32_t>(i + l)});
    i += l;
  }
}

}  // namespace tfm::tok
