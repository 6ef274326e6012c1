// The state behind tfm::Tokenizer, shared (read-only) by every copy of a tokenizer.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "tfm/tokenizer.h"
#include "tokenize/bpe_model.h"

namespace tfm::tok {

class Pipeline;
class SpmModel;

struct TransparentHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};
using TokenIdMap = std::unordered_map<std::string, std::int32_t, TransparentHash, std::equal_to<>>;

// A token matched verbatim in the input before pre-tokenization (HF "added_tokens").
struct AddedToken {
  std::string content;
  std::int32_t id = -1;
  bool special = true;
};

}  // namespace tfm::tok

namespace tfm {

struct Tokenizer::Impl {
  TokenizerKind kind = TokenizerKind::char_level;
  bool isolate_cjk = false;  // bpe: tok::cjk_isolated_gpt2_split instead of gpt2_split
  // id -> token text: byte-level BPE tokens in GPT-2's printable form ("Ġthe"), added
  // tokens and char/word tokens as themselves.
  std::vector<std::string> tokens;
  std::vector<std::string> token_bytes;  // bpe: id -> raw bytes that decode() emits
  tok::TokenIdMap token_ids;             // token text -> id
  std::vector<tok::AddedToken> added;    // longest first, for leftmost-longest matching
  std::vector<bool> special;             // per id
  std::array<bool, 256> added_first_byte{};
  std::int32_t pad = -1, unk = -1, bos = -1, eos = -1;
  std::vector<std::int32_t> prefix, suffix;  // what add_special puts around a sequence
  bool template_from_file = false;           // prefix/suffix given by a TemplateProcessing
  tok::BpeModel bpe;
  // pipeline: the tokenizer.json pipeline, which encodes and decodes. Other kinds loaded
  // from a file keep theirs too (encode_full / encode_pair use it), else it is built from
  // to_json() on first use.
  std::shared_ptr<const tok::Pipeline> pipeline;
  struct Lazy {
    std::once_flag once;
    std::shared_ptr<const tok::Pipeline> pipeline;
  };
  std::shared_ptr<Lazy> lazy = std::make_shared<Lazy>();
  std::shared_ptr<const tok::SpmModel> spm;  // sentencepiece
  TokenizerConfig config;
  std::shared_ptr<const std::string> source_json;  // pipeline kind: the document to_json() returns
  const tok::Pipeline& full_pipeline() const;

  // Validates and derives token_ids, special flags, the byte table, pad/unk/bos/eos and
  // the default template from tokens + added. Throws on duplicates or holes.
  void finalize(const char* where);

  void encode_into(std::string_view text, bool add_special, std::vector<std::int32_t>& out) const;
  void encode_plain(std::string_view text, std::vector<std::int32_t>& out) const;
  // pipeline / sentencepiece kinds (tokenizer_pipeline.cpp)
  void encode_other(std::string_view text, bool add_special, std::vector<std::int32_t>& out) const;
  std::string decode_other(std::span<const std::int32_t> ids, bool skip_special) const;
  void apply_config_and_pipeline();  // special ids from config / pipeline, in finalize()
  std::int32_t lookup_or_unk(std::string_view token) const;
};

// Builders used by train() / load() (tokenizer_json.cpp, gpt2_files.cpp, trainers).
Tokenizer make_tokenizer(Tokenizer::Impl&& impl);

}  // namespace tfm

namespace tfm::tok {
Tokenizer::Impl train_vocab(const std::vector<std::string>& corpus, const TokenizerTrainOptions& opts);
Tokenizer::Impl train_bpe(const std::vector<std::string>& corpus, const TokenizerTrainOptions& opts);
Tokenizer::Impl impl_from_json(std::string_view json_text);
// tokenizer.json document -> Impl: the hand-written paths when has_legacy_shape, else the
// pipeline; config applied (bos/eos/pad/unk).
Tokenizer::Impl impl_from_any_json(const nlohmann::json& doc, const TokenizerConfig& config,
                                   std::string_view source_text);
// The same as a Tokenizer; source_text (may be empty) is the file the document was read from.
Tokenizer tokenizer_from_json_text(const nlohmann::json& doc, const TokenizerConfig& config, std::string_view source_text);
nlohmann::json train_wordpiece_doc(const std::vector<std::string>& corpus, const TokenizerTrainOptions& opts);
// Unigram with SentencePiece's seed / EM / pruning (unigram_trainer.cpp), as tokenizer.json.
nlohmann::json train_unigram_doc(const std::vector<std::string>& corpus, const TokenizerTrainOptions& opts);
std::string impl_to_json(const Tokenizer::Impl& impl);
Tokenizer::Impl impl_from_gpt2_files(const std::string& encoder_json, const std::string& vocab_bpe);
std::string read_file(const std::string& path, const char* where);
}  // namespace tfm::tok
