// Pieces with alignments, splitting by matches (HF NormalizedString::split), encodings.
#include <algorithm>

#include "tfm/error.h"
#include "tokenize/pipeline.h"
#include "tokenize/unicode.h"

namespace tfm::tok {

void append_utf8_cp(std::string& out, std::uint32_t cp) { unicode::append_utf8(out, cp); }

int next_cp(std::string_view s, std::size_t i, std::uint32_t& cp) {
  const int len = unicode::decode_utf8(reinterpret_cast<const unsigned char*>(s.data()) + i, s.size() - i, cp);
  if (cp == unicode::kInvalid) cp = 0xFFFD;
  return len;
}

// Every byte of a char carries the char's whole range (as HF's alignments do), so a byte
// range inside a char (a byte-level or byte-fallback token) maps to that whole char.
static bool is_cont(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

Range Piece::original(std::size_t b, std::size_t e) const {
  if (align.empty()) {
    if (b < text.size() && e > b) {
      while (b > 0 && is_cont(text[b])) --b;
      while (e < text.size() && is_cont(text[e])) ++e;
    }
    return {static_cast<std::uint32_t>(base + b), static_cast<std::uint32_t>(base + e)};
  }
  if (b >= align.size()) {
    const std::uint32_t at = align.back().end;
    return {at, at};
  }
  if (e <= b) return {align[b].begin, align[b].begin};
  return {align[b].begin, align[e - 1].end};
}

Piece Piece::slice(std::size_t b, std::size_t e) const {
  Piece p;
  p.text = text.substr(b, e - b);
  p.byte_level = byte_level;
  if (align.empty())
    p.base = static_cast<std::uint32_t>(base + b);
  else
    p.align.assign(align.begin() + static_cast<std::ptrdiff_t>(b), align.begin() + static_cast<std::ptrdiff_t>(e));
  return p;
}

void Piece::materialize() {
  if (!align.empty() || text.empty()) return;
  align.resize(text.size());
  for (std::size_t i = 0; i < text.size();) {
    std::size_t j = i + 1;
    while (j < text.size() && is_cont(text[j])) ++j;
    for (std::size_t k = i; k < j; ++k) align[k] = {static_cast<std::uint32_t>(base + i), static_cast<std::uint32_t>(base + j)};
    i = j;
  }
}

void prepend(Piece& p, std::string_view s) {
  if (p.text.empty() || s.empty()) return;
  p.materialize();
  std::uint32_t cp;
  const int len = next_cp(p.text, 0, cp);
  const Range r{p.align[0].begin, p.align[static_cast<std::size_t>(len) - 1].end};
  p.text.insert(0, s);
  p.align.insert(p.align.begin(), s.size(), r);
}

SplitBehavior split_behavior_from_name(const std::string& name, const char* where) {
  if (name == "Removed") return SplitBehavior::removed;
  if (name == "Isolated") return SplitBehavior::isolated;
  if (name == "MergedWithPrevious") return SplitBehavior::merged_with_previous;
  if (name == "MergedWithNext") return SplitBehavior::merged_with_next;
  if (name == "Contiguous") return SplitBehavior::contiguous;
  fail(where, "unknown split behavior '", name,
       "' (supported: Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous)");
}

void split_piece(const Piece& p, const Matches& matches, SplitBehavior behavior, std::vector<Piece>& out) {
  // (range, remove) after applying the behavior, as HF NormalizedString::split.
  thread_local std::vector<std::pair<Range, bool>> splits;
  splits.clear();
  switch (behavior) {
    case SplitBehavior::isolated:
      for (const auto& [r, m] : matches) splits.push_back({r, false});
      break;
    case SplitBehavior::removed:
      for (const auto& [r, m] : matches) splits.push_back({r, m});
      break;
    case SplitBehavior::contiguous: {
      bool prev = false;
      for (const auto& [r, m] : matches) {
        if (m == prev && !splits.empty())
          splits.back().first.end = r.end;
        else
          splits.push_back({r, false});
        prev = m;
      }
      break;
    }
    case SplitBehavior::merged_with_previous: {
      bool prev = false;
      for (const auto& [r, m] : matches) {
        if (m && !prev && !splits.empty())
          splits.back().first.end = r.end;
        else
          splits.push_back({r, false});
        prev = m;
      }
      break;
    }
    case SplitBehavior::merged_with_next: {
      bool prev = false;
      for (auto it = matches.rbegin(); it != matches.rend(); ++it) {
        const auto& [r, m] = *it;
        if (m && !prev && !splits.empty())
          splits.back().first.begin = r.begin;
        else
          splits.push_back({r, false});
        prev = m;
      }
      std::reverse(splits.begin(), splits.end());
      break;
    }
  }
  for (const auto& [r, remove] : splits)
    if (!remove && r.end > r.begin) out.push_back(p.slice(r.begin, r.end));
}

void Encoding::append(const Encoding& o) {
  ids.insert(ids.end(), o.ids.begin(), o.ids.end());
  type_ids.insert(type_ids.end(), o.type_ids.begin(), o.type_ids.end());
  tokens.insert(tokens.end(), o.tokens.begin(), o.tokens.end());
  offsets.insert(offsets.end(), o.offsets.begin(), o.offsets.end());
  special_mask.insert(special_mask.end(), o.special_mask.begin(), o.special_mask.end());
  attention.insert(attention.end(), o.attention.begin(), o.attention.end());
}

}  // namespace tfm::tok
