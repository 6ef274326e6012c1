// Regular expressions for Split pre-tokenizers and Replace normalizers/decoders: Oniguruma,
// the engine Hugging Face `tokenizers` uses (onig crate, default syntax, UTF-8), so patterns
// such as Llama-3's mean exactly what they mean there (\p{L}, (?i:...), look-ahead).
// docs/tokenizers.md compares it with PCRE2 on that pattern.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tokenize/pipeline.h"

namespace tfm::tok {

class Regex {
 public:
  // Throws "[where] regex 'P' does not compile: <onig's message>".
  Regex(const std::string& pattern, const char* where);
  ~Regex();
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;
  // Every non-overlapping match, left to right (after an empty match the search moves
  // on by one character, as onig's find_iter does). text must be valid UTF-8.
  void find_all(std::string_view text, std::vector<Range>& out) const;
  // (range, is_match) covering text, as HF's Pattern::find_matches.
  Matches find_matches(std::string_view text) const;
  const std::string& pattern() const { return pattern_; }

 private:
  std::string pattern_;
  void* re_ = nullptr;  // OnigRegex
};

// Literal pattern (HF's {"String": ...}): escaped into a regex.
std::string regex_escape(std::string_view literal);

}  // namespace tfm::tok
