// Tokenizers: char-level, word-level and byte-level BPE (GPT-2 exact), trained here or
// loaded from tokenizer.json (Hugging Face format) or GPT-2's encoder.json + vocab.bpe.
//
//   auto tok = tfm::Tokenizer::load("data/gpt2-tokenizer");     // or a tokenizer.json
//   std::vector<int32_t> ids = tok.encode("Hello world");       // [15496, 995]
//   std::string text = tok.decode(ids);                         // "Hello world"
//
// Byte-level BPE decodes every encoding back to the original bytes, invalid UTF-8 and NUL
// included. Char/word vocabularies map unseen tokens to <unk> (so they are lossy there).
// Malformed files and out-of-range ids throw tfm::Error; nothing aborts.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tfm {

enum class TokenizerKind { char_level, word_level, bpe };
const char* tokenizer_kind_name(TokenizerKind kind);
TokenizerKind tokenizer_kind_from_name(const std::string& name);  // "char" | "word" | "bpe"

struct TokenizerTrainOptions {
  TokenizerKind kind = TokenizerKind::bpe;
  // bpe: the target vocabulary size (reserved tokens + 256 bytes + merges); training stops
  // earlier when no pair is left. char/word: an upper bound (0 = keep every token).
  std::int64_t vocab_size = 0;
  // char/word: drop tokens seen fewer than min_freq times. bpe: a pair is merged only
  // when it occurs at least min_freq times (at least 1).
  std::int64_t min_freq = 0;
  // bpe: split every CJK ideograph off as its own pre-token first (BERT's rule for Chinese
  // characters), so merges never join two of them: Chinese stays character-level while
  // other scripts get subwords. Saved as a Split + ByteLevel pre-tokenizer sequence.
  bool isolate_cjk = false;
  // Reserved tokens get ids 0.. in this order. <pad> is the padding token, <unk> the
  // unknown token, <bos>/<eos> are added around sequences on request.
  std::vector<std::string> reserved = {"<pad>", "<unk>", "<bos>", "<eos>"};
  std::vector<std::string> extra_specials;  // e.g. <cls>, <sep>, <mask>: ids after reserved
};

// A padded batch (the seeds' X and valid_lens): ids[b * length + t].
struct TokenBatch {
  std::vector<std::int32_t> ids;         // [batch, length]
  std::vector<std::int32_t> valid_lens;  // [batch], tokens before padding
  std::int64_t batch = 0, length = 0;
};

struct BatchOptions {
  bool add_special = false;     // <bos> ... <eos> (or what the tokenizer's template says)
  std::int64_t max_length = 0;  // > 0: truncate each sequence to this many tokens (specials kept)
  enum class Padding { longest, max_length } padding = Padding::longest;
  std::int32_t pad_id = -1;     // -1: the tokenizer's pad token (error when it has none)
};

class Tokenizer {
 public:
  Tokenizer();  // an empty char-level tokenizer (vocab_size 0)

  // ---- construction ----
  static Tokenizer train(const std::vector<std::string>& corpus, const TokenizerTrainOptions& opts);
  static Tokenizer train_files(const std::vector<std::string>& paths, const TokenizerTrainOptions& opts);
  // path: a tokenizer.json, a directory holding tokenizer.json, or a directory holding
  // GPT-2's encoder.json + vocab.bpe.
  static Tokenizer load(const std::string& path);
  static Tokenizer from_json(std::string_view json_text);
  static Tokenizer from_gpt2_files(const std::string& encoder_json, const std::string& vocab_bpe);
  std::string to_json() const;
  void save(const std::string& path) const;  // writes tokenizer.json (path: file or dir)

  // ---- encoding ----
  std::vector<std::int32_t> encode(std::string_view text, bool add_special = false) const;
  // Over tfm::num_threads() threads; same ids as encode() one by one.
  std::vector<std::vector<std::int32_t>> encode_batch(const std::vector<std::string>& texts,
                                                      bool add_special = false) const;
  TokenBatch encode_padded(const std::vector<std::string>& texts, const BatchOptions& opts) const;
  std::string decode(std::span<const std::int32_t> ids, bool skip_special = false) const;
  std::vector<std::string> tokenize(std::string_view text) const;  // token strings

  // ---- vocabulary ----
  TokenizerKind kind() const;
  std::int64_t vocab_size() const;
  std::string id_to_token(std::int32_t id) const;         // throws when out of range
  std::int32_t token_to_id(std::string_view token) const;  // -1 when absent
  bool is_special(std::int32_t id) const;
  std::int32_t pad_id() const;  // -1 when absent
  std::int32_t unk_id() const;
  std::int32_t bos_id() const;
  std::int32_t eos_id() const;
  std::int64_t num_merges() const;  // bpe only (0 otherwise)

  struct Impl;
  friend Tokenizer make_tokenizer(Impl&& impl);

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
};

// Throws "[where] invalid UTF-8 at byte N" unless text is well-formed UTF-8 (inputs from
// users are checked with it before they reach a tokenizer).
void check_utf8(std::string_view text, const std::string& where);

}  // namespace tfm
