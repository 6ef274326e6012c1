// The tokenizer.json pipeline as Hugging Face `tokenizers` defines it:
//   added tokens -> normalizer -> pre-tokenizer -> model -> post-processor; decoder back.
// Each stage is a small interface here; the components live in their own files
// (normalizer_*.cpp, pre_tokenizer_*.cpp, model_*.cpp, post_processor.cpp, decoder*.cpp) and
// pipeline_load.cpp assembles them from the JSON.
//
// Offsets: every byte of a piece's (normalized) text remembers the byte range of the
// original input it came from, so tokens report offsets into what the caller passed.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tokenize/tokenizer_impl.h"

namespace tfm::tok {

struct Range {
  std::uint32_t begin = 0, end = 0;
  bool operator==(const Range&) const = default;
};

// A piece of (normalized) text and where each of its bytes came from.
struct Piece {
  std::string text;
  // align[i]: original byte range of byte i. Empty means identity: byte i is original byte
  // base + i (no normalizer touched it), the common case kept allocation-free.
  std::vector<Range> align;
  std::uint32_t base = 0;
  // Set by the ByteLevel pre-tokenizer: text still holds raw bytes and the model reads
  // each byte as its GPT-2 printable character (saves the byte->char->byte round trip).
  bool byte_level = false;

  Range original(std::size_t b, std::size_t e) const;  // original range of bytes [b, e)
  Range original_whole() const { return original(0, text.size()); }
  Piece slice(std::size_t b, std::size_t e) const;
  void materialize();  // make align explicit (before a transform)
};

// Rebuilds p char by char: fn(cp, out) appends the code points that replace cp (none
// removes it). Each new char is aligned to the char it came from.
template <class Fn>
void transform_chars(Piece& p, Fn&& fn);
// Inserts text before the first char, aligned to that char (nothing when p is empty).
void prepend(Piece& p, std::string_view text);

// One split of a pre-tokenized string: a piece still to tokenize, or one already
// tokenized (an added token).
struct Token {
  std::int32_t id = -1;
  Range span;         // piece-local bytes
  std::string value;  // token text when it differs from the vocabulary's (else empty)
};

struct Split {
  Piece piece;
  std::vector<Token> tokens;
  bool done = false;  // tokens fixed (an added token): later stages leave it alone
};
using PreTokenized = std::vector<Split>;

// How a match of a split pattern is kept (HF SplitDelimiterBehavior).
enum class SplitBehavior { removed, isolated, merged_with_previous, merged_with_next, contiguous };
SplitBehavior split_behavior_from_name(const std::string& name, const char* where);
// (range, is_match) covering text, in order.
using Matches = std::vector<std::pair<Range, bool>>;
// Splits p by matches with behavior, appending the non-empty results to out.
void split_piece(const Piece& p, const Matches& matches, SplitBehavior behavior, std::vector<Piece>& out);
// Applies fn(piece, out) to every undone split, dropping empty results (HF's split()).
template <class Fn>
void split_each(PreTokenized& pt, Fn&& fn);

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual void normalize(Piece& p) const = 0;
};

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  virtual void pre_tokenize(PreTokenized& pt) const = 0;
};

class Model {
 public:
  virtual ~Model() = default;
  // Appends the tokens of one pre-token; spans are byte ranges of p.text.
  virtual void tokenize(const Piece& p, std::vector<Token>& out) const = 0;
  const std::vector<std::string>& vocab() const { return vocab_; }  // id -> token ("" for a hole)
  std::int32_t token_to_id(std::string_view t) const {
    auto it = ids_.find(t);
    return it == ids_.end() ? -1 : it->second;
  }

 protected:
  std::vector<std::string> vocab_;
  TokenIdMap ids_;
};

// An encoded sequence (HF Encoding, the fields this engine uses).
struct Encoding {
  std::vector<std::int32_t> ids, type_ids;
  std::vector<std::string> tokens;
  std::vector<Range> offsets;
  std::vector<std::uint8_t> special_mask, attention;
  std::size_t size() const { return ids.size(); }
  void append(const Encoding& o);
  void set_type_id(std::int32_t t) { type_ids.assign(ids.size(), t); }
};

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  virtual std::size_t added_tokens(bool pair) const = 0;
  // a (and b for a pair) -> the final encoding, specials added when add_special.
  virtual Encoding process(Encoding a, const Encoding* b, bool add_special) const = 0;
};

class Decoder {
 public:
  virtual ~Decoder() = default;
  virtual void decode_chain(std::vector<std::string>& tokens) const = 0;
};

struct AddedTokenSpec {
  std::string content;
  std::int32_t id = -1;
  bool single_word = false, lstrip = false, rstrip = false, normalized = true, special = false;
};

// Added tokens: matched leftmost-longest in the raw text (normalized=false) or in the
// normalized pieces (normalized=true), with HF's lstrip/rstrip/single_word rules.
class AddedVocab {
 public:
  void build(std::vector<AddedTokenSpec> tokens, const Normalizer* normalizer);
  // Splits each undone split of pt around the matches of raw (normalized=false) or
  // normalized tokens.
  void extract(PreTokenized& pt, bool normalized_set) const;
  const std::vector<AddedTokenSpec>& tokens() const { return tokens_; }
  const AddedTokenSpec* by_id(std::int32_t id) const;
  std::int32_t id_of(std::string_view content) const;

 private:
  struct Set {
    std::vector<std::pair<std::string, std::int32_t>> patterns;  // longest first
    bool first_byte[256] = {};
  };
  void find(std::string_view s, const Set& set, std::vector<std::pair<Range, std::int32_t>>& out) const;
  std::vector<AddedTokenSpec> tokens_;
  std::vector<std::int32_t> index_of_id_;  // id -> index in tokens_ (-1)
  Set raw_, normalized_;
};

struct TruncationParams {
  std::size_t max_length = 0;
  std::size_t stride = 0;
  std::string strategy = "longest_first";  // longest_first | only_first | only_second
  std::string direction = "right";
};
struct PaddingParams {
  bool fixed = false;  // Fixed(length) vs BatchLongest
  std::size_t length = 0, multiple_of = 0;
  std::int32_t pad_id = 0, pad_type_id = 0;
  std::string pad_token = "[PAD]";
  std::string direction = "right";
};

class Pipeline {
 public:
  AddedVocab added;
  std::unique_ptr<Normalizer> normalizer;
  std::unique_ptr<PreTokenizer> pre_tokenizer;
  std::unique_ptr<Model> model;
  std::unique_ptr<PostProcessor> post_processor;
  std::unique_ptr<Decoder> decoder;
  std::optional<TruncationParams> truncation;
  std::optional<PaddingParams> padding;
  std::vector<std::string> id_to_token;  // model vocab + added tokens
  std::vector<bool> special;             // per id

  Encoding encode(std::string_view text, bool add_special, bool with_tokens = true) const;
  Encoding encode_pair(std::string_view a, std::string_view b, bool add_special) const;
  std::string decode(const std::vector<std::int32_t>& ids, bool skip_special) const;

 private:
  Encoding encode_sequence(std::string_view text, std::int32_t type_id, bool with_tokens) const;
};

std::shared_ptr<const Pipeline> pipeline_from_json(std::string_view json_text);

// ---- template definitions --------------------------------------------------------------
void append_utf8_cp(std::string& out, std::uint32_t cp);
int next_cp(std::string_view s, std::size_t i, std::uint32_t& cp);  // length; U+FFFD on bad bytes

template <class Fn>
void transform_chars(Piece& p, Fn&& fn) {
  p.materialize();
  std::string text;
  std::vector<Range> align;
  text.reserve(p.text.size());
  align.reserve(p.text.size());
  std::vector<std::uint32_t> cps;
  for (std::size_t i = 0; i < p.text.size();) {
    std::uint32_t cp;
    const int len = next_cp(p.text, i, cp);
    const Range r{p.align[i].begin, p.align[i + len - 1].end};
    cps.clear();
    fn(cp, cps);
    for (std::uint32_t c : cps) {
      const std::size_t before = text.size();
      append_utf8_cp(text, c);
      align.insert(align.end(), text.size() - before, r);
    }
    i += static_cast<std::size_t>(len);
  }
  p.text = std::move(text);
  p.align = std::move(align);
}

template <class Fn>
void split_each(PreTokenized& pt, Fn&& fn) {
  PreTokenized next;
  next.reserve(pt.size());
  std::vector<Piece> pieces;
  for (Split& s : pt) {
    if (s.done) {
      next.push_back(std::move(s));
      continue;
    }
    pieces.clear();
    fn(s.piece, pieces);
    for (Piece& p : pieces)
      if (!p.text.empty()) next.push_back(Split{std::move(p), {}, false});
  }
  pt = std::move(next);
}

}  // namespace tfm::tok
