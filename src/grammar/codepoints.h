// Sets of Unicode code points (a character class) and their UTF-8 byte sequences, so the
// byte-level matcher can take a class one byte at a time.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "grammar/rules.h"

namespace tfm {

constexpr std::uint32_t kMaxCodePoint = 0x10FFFF;

// Inclusive ranges, sorted and merged by normalize().
using CodePointSet = std::vector<std::pair<std::uint32_t, std::uint32_t>>;

CodePointSet normalize(CodePointSet s);
// All scalar values (no surrogates) not in s.
CodePointSet complement(const CodePointSet& s);
// s without the surrogates D800-DFFF (they have no UTF-8 form).
CodePointSet without_surrogates(const CodePointSet& s);

// The UTF-8 encodings of the code points in s, as sequences of byte ranges: every encoding
// of a member is matched by exactly one sequence, byte range by byte range.
std::vector<std::vector<std::pair<std::uint8_t, std::uint8_t>>> utf8_sequences(const CodePointSet& s);

}  // namespace tfm
