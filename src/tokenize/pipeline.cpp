// Pipeline::encode / decode: the stages in HF's order, truncation and padding from the file.
#include <algorithm>

#include "tfm/error.h"
#include "tokenize/components.h"

namespace tfm::tok {

Encoding Pipeline::encode_sequence(std::string_view text, std::int32_t type_id, bool with_tokens) const {
  check_utf8(text, "tokenizer");  // regexes and normalizers read chars (HF takes a str too)
  PreTokenized pt;
  pt.push_back(Split{Piece{std::string(text), {}, 0, false}, {}, false});
  added.extract(pt, false);
  if (normalizer) {
    for (Split& s : pt)
      if (!s.done) normalizer->normalize(s.piece);
    std::erase_if(pt, [](const Split& s) { return !s.done && s.piece.text.empty(); });
  }
  added.extract(pt, true);
  if (pre_tokenizer) pre_tokenizer->pre_tokenize(pt);
  Encoding e;
  thread_local std::vector<Token> toks;
  for (const Split& s : pt) {
    toks.clear();
    const std::vector<Token>* src = &s.tokens;
    if (!s.done) {
      model->tokenize(s.piece, toks);
      src = &toks;
    }
    for (const Token& t : *src) {
      e.ids.push_back(t.id);
      const std::uint32_t end = std::min<std::uint32_t>(t.span.end, static_cast<std::uint32_t>(s.piece.text.size()));
      e.offsets.push_back(s.piece.original(std::min(t.span.begin, end), end));
      if (with_tokens) e.tokens.push_back(!t.value.empty() ? t.value : id_to_token[static_cast<std::size_t>(t.id)]);
    }
  }
  e.type_ids.assign(e.ids.size(), type_id);
  e.special_mask.assign(e.ids.size(), 0);
  e.attention.assign(e.ids.size(), 1);
  if (!with_tokens) e.tokens.assign(e.ids.size(), std::string());
  return e;
}

static void truncate_to(Encoding& e, std::size_t n, bool left) {
  if (e.size() <= n) return;
  auto cut = [&](auto& v) {
    if (left)
      v.erase(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() - n));
    else
      v.resize(n);
  };
  cut(e.ids);
  cut(e.type_ids);
  cut(e.tokens);
  cut(e.offsets);
  cut(e.special_mask);
  cut(e.attention);
}

static void pad_to(Encoding& e, const PaddingParams& p, std::size_t n) {
  if (e.size() >= n) return;
  const std::size_t k = n - e.size();
  const bool left = p.direction == "left";
  auto pad = [&](auto& v, auto value) { v.insert(left ? v.begin() : v.end(), k, value); };
  pad(e.ids, p.pad_id);
  pad(e.type_ids, p.pad_type_id);
  pad(e.tokens, p.pad_token);
  pad(e.offsets, Range{0, 0});
  pad(e.special_mask, std::uint8_t{1});
  pad(e.attention, std::uint8_t{0});
}

static Encoding finish(const Pipeline& pl, Encoding a, Encoding* b, bool add_special) {
  if (pl.truncation && pl.truncation->max_length > 0) {
    const std::size_t extra = add_special && pl.post_processor ? pl.post_processor->added_tokens(b != nullptr) : 0;
    const std::size_t room = pl.truncation->max_length > extra ? pl.truncation->max_length - extra : 0;
    const bool left = pl.truncation->direction == "left";
    if (!b) {
      truncate_to(a, room, left);
    } else {
      const std::string& st = pl.truncation->strategy;
      if (st == "only_first") {
        truncate_to(a, room > b->size() ? room - b->size() : 0, left);
      } else if (st == "only_second") {
        truncate_to(*b, room > a.size() ? room - a.size() : 0, left);
      } else {  // longest_first: take from the longer one, one token at a time
        while (a.size() + b->size() > room) {
          if (a.size() >= b->size())
            truncate_to(a, a.size() - 1, left);
          else
            truncate_to(*b, b->size() - 1, left);
        }
      }
    }
  }
  Encoding out = pl.post_processor ? pl.post_processor->process(std::move(a), b, add_special) : default_process(std::move(a), b);
  if (pl.padding) {
    std::size_t n = pl.padding->fixed ? pl.padding->length : out.size();
    if (pl.padding->multiple_of > 0 && n % pl.padding->multiple_of) n += pl.padding->multiple_of - n % pl.padding->multiple_of;
    pad_to(out, *pl.padding, n);
  }
  return out;
}

Encoding Pipeline::encode(std::string_view text, bool add_special, bool with_tokens) const {
  return finish(*this, encode_sequence(text, 0, with_tokens), nullptr, add_special);
}

Encoding Pipeline::encode_pair(std::string_view a, std::string_view b, bool add_special) const {
  Encoding eb = encode_sequence(b, 1, true);
  return finish(*this, encode_sequence(a, 0, true), &eb, add_special);
}

std::string Pipeline::decode(const std::vector<std::int32_t>& ids, bool skip_special) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (std::int32_t id : ids) {
    TFM_CHECK(id >= 0 && static_cast<std::size_t>(id) < id_to_token.size(), "tokenizer decode", "id ", id,
              " out of range [0, ", id_to_token.size(), ")");
    if (skip_special && special[static_cast<std::size_t>(id)]) continue;
    tokens.push_back(id_to_token[static_cast<std::size_t>(id)]);
  }
  if (!decoder) {
    std::string out;
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      if (i) out += ' ';
      out += tokens[i];
    }
    return out;
  }
  decoder->decode_chain(tokens);
  std::string out;
  for (const auto& t : tokens) out += t;
  return out;
}

}  // namespace tfm::tok
