// The compiled grammar: byte-level rules. A rule is a list of alternatives; an alternative is
// a run of elements in `elems` ending with an `end` element. An element matches one byte out
// of a set (`bytes`), or a whole rule (`ref`). Character classes and repetitions of the source
// became helper rules, so the matcher only ever sees bytes, references and ends.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace tfm {

using ByteSet = std::array<std::uint64_t, 4>;

inline bool byteset_has(const ByteSet& s, unsigned b) { return (s[b >> 6] >> (b & 63)) & 1; }
inline void byteset_add(ByteSet& s, unsigned lo, unsigned hi) {
  for (unsigned b = lo; b <= hi; ++b) s[b >> 6] |= std::uint64_t{1} << (b & 63);
}

struct GrammarElem {
  enum Kind : std::uint8_t { end, bytes, ref } kind = end;
  std::int32_t value = 0;  // bytes: index into byte_sets; ref: rule id
};

constexpr std::int32_t kGrammarInf = std::numeric_limits<std::int32_t>::max() / 4;

struct GrammarRules {
  std::vector<GrammarElem> elems;
  std::vector<ByteSet> byte_sets;
  std::vector<std::vector<std::int32_t>> alternatives;  // per rule: start indices into elems
  std::vector<std::string> names;                       // per rule (helpers: parent-derived)
  std::int32_t root = 0;
  // Shortest text each rule matches, and from each element position to its alternative's
  // end (kGrammarInf: matches nothing) — the matcher's distance to a finish.
  std::vector<std::int32_t> min_len, min_rest;
};

// Checks the rules (every referenced rule defined, no left recursion, root matches something)
// and fills min_len / min_rest. `where` names the grammar in errors.
void finish_rules(GrammarRules& r, const std::string& where);

}  // namespace tfm
