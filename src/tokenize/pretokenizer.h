// Pre-tokenizers: split text into the pieces a model encodes one by one.
//
// gpt2_split implements, without std::regex, exactly tiktoken's gpt2 pattern
//   '(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// (\s = Unicode White_Space, as in Rust's regex). Invalid UTF-8 bytes count as "other",
// the class U+FFFD has. Pieces are emitted as (begin, end) byte offsets into the text.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace tfm::tok {

struct Span {
  std::uint32_t begin, end;
};

// Appends GPT-2 pre-token spans of text (text.size() < 4 GiB) to out.
void gpt2_split(std::string_view text, std::vector<Span>& out);

// BERT's Chinese-character rule before GPT-2's split: every CJK ideograph (is_cjk_ideograph)
// is a piece of its own and the text between them is gpt2_split. BPE then never merges across
// Chinese characters, so Chinese is encoded character by character (or in bytes for a rare
// one) while other scripts still get subwords. In tokenizer.json: a Sequence of
// Split(kCjkPattern, Isolated) and ByteLevel.
void cjk_isolated_gpt2_split(std::string_view text, std::vector<Span>& out);
bool is_cjk_ideograph(std::uint32_t cp);  // the ranges of BERT's _is_chinese_char
extern const char* const kCjkPattern;     // the same set as a tokenizers (Oniguruma) regex

// Word-level: maximal runs of non-White_Space code points.
void whitespace_split(std::string_view text, std::vector<Span>& out);

// Char-level: one span per code point (an invalid byte is its own span).
void codepoint_split(std::string_view text, std::vector<Span>& out);

}  // namespace tfm::tok
