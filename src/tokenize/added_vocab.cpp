// Added tokens: leftmost-longest matching with HF's single_word, lstrip and rstrip rules.
#include <algorithm>

#include "tokenize/pipeline.h"
#include "tokenize/uprops.h"

namespace tfm::tok {

void AddedVocab::build(std::vector<AddedTokenSpec> tokens, const Normalizer* normalizer) {
  tokens_ = std::move(tokens);
  std::int32_t max_id = -1;
  for (const auto& t : tokens_) max_id = std::max(max_id, t.id);
  index_of_id_.assign(static_cast<std::size_t>(max_id + 1), -1);
  raw_ = Set{};
  normalized_ = Set{};
  for (std::size_t i = 0; i < tokens_.size(); ++i) {
    const auto& t = tokens_[i];
    index_of_id_[static_cast<std::size_t>(t.id)] = static_cast<std::int32_t>(i);
    std::string pattern = t.content;
    if (t.normalized && normalizer) {  // matched against normalized text: normalize it too
      Piece p{t.content, {}, 0, false};
      normalizer->normalize(p);
      pattern = p.text;
    }
    if (pattern.empty()) continue;
    Set& set = t.normalized ? normalized_ : raw_;
    set.patterns.emplace_back(pattern, t.id);
    set.first_byte[static_cast<unsigned char>(pattern[0])] = true;
  }
  for (Set* s : {&raw_, &normalized_})
    std::stable_sort(s->patterns.begin(), s->patterns.end(),
                     [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
}

const AddedTokenSpec* AddedVocab::by_id(std::int32_t id) const {
  if (id < 0 || static_cast<std::size_t>(id) >= index_of_id_.size() || index_of_id_[id] < 0) return nullptr;
  return &tokens_[static_cast<std::size_t>(index_of_id_[id])];
}

std::int32_t AddedVocab::id_of(std::string_view content) const {
  for (const auto& t : tokens_)
    if (t.content == content) return t.id;
  return -1;
}

static bool ends_with_word(std::string_view s) {
  if (s.empty()) return false;
  std::size_t i = s.size() - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  std::uint32_t cp;
  next_cp(s, i, cp);
  return uprops::is_word_char(cp);
}

static bool starts_with_word(std::string_view s) {
  if (s.empty()) return false;
  std::uint32_t cp;
  next_cp(s, 0, cp);
  return uprops::is_word_char(cp);
}

void AddedVocab::find(std::string_view s, const Set& set, std::vector<std::pair<Range, std::int32_t>>& out) const {
  std::size_t start_offset = 0;
  for (std::size_t i = 0; i < s.size();) {
    if (!set.first_byte[static_cast<unsigned char>(s[i])]) {
      ++i;
      continue;
    }
    const std::pair<std::string, std::int32_t>* hit = nullptr;
    for (const auto& p : set.patterns) {
      if (s.compare(i, p.first.size(), p.first) == 0) {
        hit = &p;
        break;
      }
    }
    if (!hit) {
      ++i;
      continue;
    }
    std::size_t start = i, stop = i + hit->first.size();
    i = stop;  // the search goes on after this match whether it is kept or not
    const AddedTokenSpec& t = *by_id(hit->second);
    if (t.single_word) {
      const bool start_space = start == 0 || !ends_with_word(s.substr(0, start));
      const bool stop_space = stop == s.size() || !starts_with_word(s.substr(stop));
      if (!start_space || !stop_space) continue;
    }
    if (t.lstrip) {
      std::size_t b = start;
      while (b > 0) {
        std::size_t c = b - 1;
        while (c > 0 && (static_cast<unsigned char>(s[c]) & 0xC0) == 0x80) --c;
        std::uint32_t cp;
        next_cp(s, c, cp);
        if (!uprops::is_whitespace(cp)) break;
        b = c;
      }
      start = std::max(b, start_offset);
    }
    if (t.rstrip) {
      while (stop < s.size()) {
        std::uint32_t cp;
        const int len = next_cp(s, stop, cp);
        if (!uprops::is_whitespace(cp)) break;
        stop += static_cast<std::size_t>(len);
      }
    }
    out.push_back({{static_cast<std::uint32_t>(start), static_cast<std::uint32_t>(stop)}, t.id});
    start_offset = stop;
  }
}

void AddedVocab::extract(PreTokenized& pt, bool normalized_set) const {
  const Set& set = normalized_set ? normalized_ : raw_;
  if (set.patterns.empty()) return;
  PreTokenized next;
  std::vector<std::pair<Range, std::int32_t>> found;
  for (Split& sp : pt) {
    if (sp.done) {
      next.push_back(std::move(sp));
      continue;
    }
    found.clear();
    find(sp.piece.text, set, found);
    if (found.empty()) {
      next.push_back(std::move(sp));
      continue;
    }
    std::size_t prev = 0;
    for (const auto& [r, id] : found) {
      if (prev < r.begin) next.push_back(Split{sp.piece.slice(prev, r.begin), {}, false});
      Split tok{sp.piece.slice(r.begin, r.end), {}, true};
      tok.tokens.push_back({id, {0, r.end - r.begin}, tok.piece.text});
      next.push_back(std::move(tok));
      prev = std::max<std::size_t>(prev, r.end);
    }
    if (prev < sp.piece.text.size()) next.push_back(Split{sp.piece.slice(prev, sp.piece.text.size()), {}, false});
  }
  pt = std::move(next);
}

}  // namespace tfm::tok
