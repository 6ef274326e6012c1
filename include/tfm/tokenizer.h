// Tokenizers: char-level, word-level and byte-level BPE (GPT-2 exact), trained here, and
// every tokenizer.json Hugging Face `tokenizers` defines (the whole pipeline: added tokens,
// normalizers, pre-tokenizers, BPE/WordPiece/Unigram/WordLevel, post-processors, decoders;
// byte-exact with HF), plus the older files: vocab.json + merges.txt (GPT-2, RoBERTa),
// vocab.txt (BERT), GPT-2's encoder.json + vocab.bpe, and SentencePiece .model files.
//
//   auto tok = tfm::load_tokenizer("models/llama3");             // a directory or a file
//   std::vector<int32_t> ids = tok.encode("Hello world");       // [15496, 995]
//   std::string text = tok.decode(ids);                         // "Hello world"
//
// Byte-level BPE decodes every encoding back to the original bytes, invalid UTF-8 and NUL
// included. Char/word vocabularies map unseen tokens to <unk> (so they are lossy there).
// Malformed files and out-of-range ids throw tfm::Error; nothing aborts.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tfm {

// pipeline: a tokenizer.json of any shape HF defines (or a file converted to one);
// sentencepiece: a SentencePiece .model run by libsentencepiece.
// wordpiece: only as a training kind (BERT's pipeline; the result is a pipeline tokenizer).
enum class TokenizerKind { char_level, word_level, bpe, pipeline, sentencepiece, wordpiece, unigram };
const char* tokenizer_kind_name(TokenizerKind kind);
TokenizerKind tokenizer_kind_from_name(const std::string& name);  // "char" | "word" | "bpe" | "wordpiece" | "unigram"

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

// tokenizer_config.json (transformers' side of a model directory). Strings are empty and
// optionals unset when the file does not give them.
struct TokenizerConfig {
  bool present = false;
  std::string bos_token, eos_token, pad_token, unk_token;
  std::optional<bool> add_bos_token, add_eos_token;
  std::int64_t model_max_length = 0;  // 0: not given (or transformers' 1e30 "no limit")
  std::string chat_template;          // verbatim (the "default" one when the file lists several)
  std::string tokenizer_class;
};
// Parses tokenizer_config.json text; where names the file in errors.
TokenizerConfig parse_tokenizer_config(std::string_view json_text, const std::string& where);

// Everything HF's Encoding gives for one input (or a pair).
struct Encoding {
  std::vector<std::int32_t> ids, type_ids, special_tokens_mask, attention_mask;
  std::vector<std::string> tokens;
  std::vector<std::pair<std::uint32_t, std::uint32_t>> offsets;  // byte ranges of the input(s)
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
  // tokenizer.json text plus its tokenizer_config.json (bos/eos/pad/unk, chat template).
  static Tokenizer from_json(std::string_view json_text, const TokenizerConfig& config);
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
  // ids, type ids, tokens, offsets and masks; the pair form applies the file's pair template.
  // The file's truncation/padding sections apply here as in HF.
  Encoding encode_full(std::string_view text, bool add_special = false) const;
  Encoding encode_pair(std::string_view a, std::string_view b, bool add_special = true) const;

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
  const TokenizerConfig& config() const;  // tokenizer_config.json when one was loaded
  const std::string& chat_template() const { return config().chat_template; }

  struct Impl;
  friend Tokenizer make_tokenizer(Impl&& impl);

 private:
  explicit Tokenizer(std::shared_ptr<const Impl> impl);
  std::shared_ptr<const Impl> impl_;
};

// The single entry point for files: path is a model directory or a file.
//   directory: tokenizer.json (wins), else vocab.json + merges.txt, else encoder.json +
//              vocab.bpe, else vocab.txt, else a SentencePiece *.model; with
//              tokenizer_config.json (and chat_template.jinja) read when present.
//   file:      tokenizer.json (any *.json with a "model"), vocab.json (merges.txt beside it),
//              vocab.txt, *.model; a tokenizer_config.json beside it is read too.
Tokenizer load_tokenizer(const std::string& path);

// Throws "[where] invalid UTF-8 at byte N" unless text is well-formed UTF-8 (inputs from
// users are checked with it before they reach a tokenizer).
void check_utf8(std::string_view text, const std::string& where);

}  // namespace tfm
