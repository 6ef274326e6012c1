// WordPiece training (`tfm tokenizer train --type wordpiece`), as HF's WordPieceTrainer does
// it: BERT's normalizer and pre-tokenizer make the words, then BPE over chars where every
// char after a word's first carries the "##" prefix; a merge of a and ##b makes "a" + "b"
// (##-prefixed when a is). The vocabulary (specials, the alphabet, then the merged tokens
// in merge order) becomes a WordPiece model with BERT's pipeline, saved as tokenizer.json.
// Ties between equally frequent pairs go to the smallest (left id, right id): deterministic.
#include <algorithm>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "tfm/error.h"
#include "tfm/tokenizer_json.h"
#include "tokenize/components.h"
#include "tokenize/pair_merges.h"
#include "tokenize/tokenizer_impl.h"
#include "tokenize/unicode.h"

namespace tfm::tok {

namespace {

using Word = PairMerges::Word;

constexpr const char* kPrefix = "##";

}  // namespace

nlohmann::json train_wordpiece_doc(const std::vector<std::string>& corpus, const TokenizerTrainOptions& opts) {
  const char* where = "tokenizer train";
  std::vector<std::string> specials = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  for (const auto& s : opts.extra_specials)
    if (std::find(specials.begin(), specials.end(), s) == specials.end()) specials.push_back(s);
  std::vector<std::string> tokens = specials;
  TokenIdMap ids;
  for (std::size_t i = 0; i < tokens.size(); ++i) ids.emplace(tokens[i], static_cast<std::int32_t>(i));
  auto id_of = [&](const std::string& t) {
    auto it = ids.find(t);
    if (it != ids.end()) return it->second;
    const auto id = static_cast<std::int32_t>(tokens.size());
    tokens.push_back(t);
    ids.emplace(t, id);
    return id;
  };

  // Words: BERT normalizer + pre-tokenizer, counted once each.
  const auto normalizer = make_bert_normalizer(true, true, true, true);
  const auto pre = make_bert_pre();
  TokenIdMap word_index;
  std::vector<std::string> word_text;
  std::vector<std::int64_t> word_count;
  for (const auto& line : corpus) {
    if (!unicode::is_valid_utf8(line)) continue;
    PreTokenized pt{Split{Piece{line, {}, 0, false}, {}, false}};
    normalizer->normalize(pt[0].piece);
    pre->pre_tokenize(pt);
    for (const Split& s : pt) {
      auto it = word_index.find(s.piece.text);
      if (it == word_index.end()) {
        it = word_index.emplace(s.piece.text, static_cast<std::int32_t>(word_text.size())).first;
        word_text.push_back(s.piece.text);
        word_count.push_back(0);
      }
      ++word_count[static_cast<std::size_t>(it->second)];
    }
  }
  // The alphabet in sorted order (so ids do not depend on corpus order), then the words.
  std::vector<std::string> alphabet;
  for (const auto& w : word_text) {
    for (std::size_t i = 0; i < w.size();) {
      std::uint32_t cp;
      const auto len = static_cast<std::size_t>(next_cp(w, i, cp));
      alphabet.push_back((i ? std::string(kPrefix) : std::string()) + w.substr(i, len));
      i += len;
    }
  }
  std::sort(alphabet.begin(), alphabet.end());
  alphabet.erase(std::unique(alphabet.begin(), alphabet.end()), alphabet.end());
  for (const auto& a : alphabet) id_of(a);
  TFM_CHECK(opts.vocab_size <= 0 || opts.vocab_size >= static_cast<std::int64_t>(tokens.size()), where,
            "wordpiece vocab_size ", opts.vocab_size, " is below the ", tokens.size(),
            " tokens the specials and the alphabet need");
  std::vector<Word> words(word_text.size());
  for (std::size_t w = 0; w < word_text.size(); ++w) {
    const std::string& t = word_text[w];
    for (std::size_t i = 0; i < t.size();) {
      std::uint32_t cp;
      const auto len = static_cast<std::size_t>(next_cp(t, i, cp));
      words[w].syms.push_back(ids.find((i ? std::string(kPrefix) : std::string()) + t.substr(i, len))->second);
      i += len;
    }
    words[w].count = word_count[w];
  }

  PairMerges merges(std::move(words));
  const std::int64_t min_count = std::max<std::int64_t>(1, opts.min_freq);
  const std::int64_t target = opts.vocab_size > 0 ? opts.vocab_size : 30000;
  std::int32_t a = 0, b = 0;
  std::int64_t count = 0;
  while (static_cast<std::int64_t>(tokens.size()) < target && merges.next(a, b, count)) {
    if (count < min_count) break;
    const std::string& bt = tokens[static_cast<std::size_t>(b)];
    const std::string text = tokens[static_cast<std::size_t>(a)] + (bt.rfind(kPrefix, 0) == 0 ? bt.substr(2) : bt);
    const std::int32_t new_id = id_of(text);
    merges.merge(a, b, new_id);
  }

  using nlohmann::json;
  json vocab = json::object();
  for (std::size_t i = 0; i < tokens.size(); ++i) vocab[tokens[i]] = i;
  json added = json::array();
  for (std::size_t i = 0; i < specials.size(); ++i)
    added.push_back({{"id", i}, {"content", specials[i]}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                     {"normalized", false}, {"special", true}});
  json doc;
  doc["version"] = "1.0";
  doc["truncation"] = nullptr;
  doc["padding"] = nullptr;
  doc["added_tokens"] = added;
  doc["normalizer"] = {{"type", "BertNormalizer"}, {"clean_text", true}, {"handle_chinese_chars", true},
                       {"strip_accents", nullptr}, {"lowercase", true}};
  doc["pre_tokenizer"] = {{"type", "BertPreTokenizer"}};
  doc["post_processor"] = {{"type", "BertProcessing"}, {"sep", {"[SEP]", 3}}, {"cls", {"[CLS]", 2}}};
  doc["decoder"] = {{"type", "WordPiece"}, {"prefix", kPrefix}, {"cleanup", true}};
  doc["model"] = {{"type", "WordPiece"}, {"unk_token", "[UNK]"}, {"continuing_subword_prefix", kPrefix},
                  {"max_input_chars_per_word", 100}, {"vocab", vocab}};
  return doc;
}

}  // namespace tfm::tok
