#include "grammar/codepoints.h"

#include <algorithm>

#include "base/utf8.h"

namespace tfm {

CodePointSet normalize(CodePointSet s) {
  std::sort(s.begin(), s.end());
  CodePointSet out;
  for (const auto& [lo, hi] : s) {
    if (lo > hi) continue;
    if (!out.empty() && lo <= out.back().second + 1) out.back().second = std::max(out.back().second, hi);
    else out.emplace_back(lo, hi);
  }
  return out;
}

CodePointSet complement(const CodePointSet& s) {
  CodePointSet out;
  std::uint32_t next = 0;
  for (const auto& [lo, hi] : normalize(s)) {
    if (lo > next) out.emplace_back(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.emplace_back(next, kMaxCodePoint);
  return without_surrogates(out);
}

CodePointSet without_surrogates(const CodePointSet& s) {
  CodePointSet out;
  for (const auto& [lo, hi] : normalize(s)) {
    if (hi < 0xD800 || lo > 0xDFFF) {
      out.emplace_back(lo, hi);
      continue;
    }
    if (lo < 0xD800) out.emplace_back(lo, 0xD7FF);
    if (hi > 0xDFFF) out.emplace_back(0xE000, hi);
  }
  return out;
}

namespace {

using Seq = std::vector<std::pair<std::uint8_t, std::uint8_t>>;

// Splits [lo, hi] until each piece's encodings differ only in bytes that run over whole
// ranges, then emits the piece as one byte-range sequence (the classic UTF-8 range split).
void split(std::uint32_t lo, std::uint32_t hi, std::vector<Seq>& out) {
  for (const std::uint32_t edge : {0x7Fu, 0x7FFu, 0xFFFFu})
    if (lo <= edge && hi > edge) {
      split(lo, edge, out);
      split(edge + 1, hi, out);
      return;
    }
  if (hi < 0x80) {
    out.push_back({{static_cast<std::uint8_t>(lo), static_cast<std::uint8_t>(hi)}});
    return;
  }
  const int n = hi < 0x800 ? 2 : hi < 0x10000 ? 3 : 4;
  for (int i = 1; i < n; ++i) {
    const std::uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        split(lo, lo | m, out);
        split((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        split(lo, (hi & ~m) - 1, out);
        split(hi & ~m, hi, out);
        return;
      }
    }
  }
  std::string a, b;
  append_utf8(a, lo);
  append_utf8(b, hi);
  Seq seq;
  for (std::size_t i = 0; i < a.size(); ++i)
    seq.emplace_back(static_cast<std::uint8_t>(a[i]), static_cast<std::uint8_t>(b[i]));
  out.push_back(std::move(seq));
}

}  // namespace

std::vector<Seq> utf8_sequences(const CodePointSet& s) {
  std::vector<Seq> out;
  for (const auto& [lo, hi] : without_surrogates(s)) split(lo, hi, out);
  return out;
}

}  // namespace tfm
