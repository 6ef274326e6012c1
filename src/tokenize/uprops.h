// Unicode character properties for the pipeline components, from ICU: the predicates HF
// `tokenizers` takes from Rust's char methods and the unicode-categories crate.
#pragma once

#include <cstdint>
#include <string>

namespace tfm::tok::uprops {

bool is_whitespace(std::uint32_t cp);   // White_Space (Rust char::is_whitespace)
bool is_numeric(std::uint32_t cp);      // Nd | Nl | No (Rust char::is_numeric)
bool is_alphanumeric(std::uint32_t cp); // Alphabetic | numeric
bool is_punctuation(std::uint32_t cp);  // ASCII punctuation or a P* category (BERT, Punctuation)
bool is_other(std::uint32_t cp);        // C* categories (BERT's is_control, minus \t\n\r)
bool is_mark(std::uint32_t cp);         // M* (StripAccents)
bool is_mark_nonspacing(std::uint32_t cp);  // Mn (BertNormalizer strip_accents)
bool is_word_char(std::uint32_t cp);    // Rust regex \w: Alphabetic, M, Nd, Pc, Join_Control
bool is_cjk(std::uint32_t cp);          // BERT's _is_chinese_char ranges
// Full lowercase mapping of one char (Rust char::to_lowercase), appended as UTF-8.
void append_lower(std::string& out, std::uint32_t cp);
void lower_into(std::uint32_t cp, std::uint32_t* out, int& n);  // up to 3 code points

enum class Form { nfc, nfd, nfkc, nfkd };
// Normalizes UTF-8 text; false when it is already in that form (then out is untouched).
bool normalize(Form form, const std::string& in, std::string& out);
bool is_normalized(Form form, const std::string& in);
bool has_boundary_before(Form form, std::uint32_t cp);
std::uint8_t combining_class(std::uint32_t cp);  // canonical combining class (ccc)
std::int32_t compose_pair(std::uint32_t a, std::uint32_t b);  // canonical composite, -1 if none

}  // namespace tfm::tok::uprops
