// tfm::Tokenizer: added-token splitting, per-kind encoding, decoding, vocabulary queries.
#include <omp.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tfm/error.h"
#include "tfm/runtime.h"
#include "tokenize/pretokenizer.h"
#include "tfm/tokenizer_json.h"
#include "tokenize/tokenizer_impl.h"

namespace tfm {

using tok::Span;

const char* tokenizer_kind_name(TokenizerKind kind) {
  switch (kind) {
    case TokenizerKind::char_level: return "char";
    case TokenizerKind::word_level: return "word";
    case TokenizerKind::bpe: return "bpe";
    case TokenizerKind::pipeline: return "pipeline";
    case TokenizerKind::sentencepiece: return "sentencepiece";
    case TokenizerKind::wordpiece: return "wordpiece";
    case TokenizerKind::unigram: return "unigram";
  }
  return "?";
}

TokenizerKind tokenizer_kind_from_name(const std::string& name) {
  if (name == "char") return TokenizerKind::char_level;
  if (name == "word") return TokenizerKind::word_level;
  if (name == "bpe") return TokenizerKind::bpe;
  if (name == "wordpiece") return TokenizerKind::wordpiece;
  if (name == "unigram") return TokenizerKind::unigram;
  fail("tokenizer", "unknown tokenizer type '", name, "' (expected char, word, bpe, wordpiece or unigram)");
}

void Tokenizer::Impl::finalize(const char* where) {
  const std::size_t n = tokens.size();
  special.assign(n, false);
  token_ids.clear();
  token_ids.reserve(n * 2);
  for (std::size_t id = 0; id < n; ++id) {
    auto [it, inserted] = token_ids.emplace(tokens[id], static_cast<std::int32_t>(id));
    TFM_CHECK(inserted, where, "token '", tokens[id], "' has two ids: ", it->second, " and ", id);
  }
  added_first_byte.fill(false);
  for (const auto& a : added) {
    TFM_CHECK(!a.content.empty(), where, "empty added token (id ", a.id, ")");
    TFM_CHECK(a.id >= 0 && static_cast<std::size_t>(a.id) < n && tokens[a.id] == a.content, where,
              "added token '", a.content, "' id ", a.id, " does not match the vocabulary");
    special[a.id] = a.special;
    added_first_byte[static_cast<unsigned char>(a.content[0])] = true;
  }
  std::stable_sort(added.begin(), added.end(),
                   [](const tok::AddedToken& a, const tok::AddedToken& b) { return a.content.size() > b.content.size(); });
  auto find_special = [&](std::initializer_list<const char*> names) {
    for (const char* s : names) {
      auto it = token_ids.find(std::string_view(s));
      if (it != token_ids.end()) return it->second;
    }
    return -1;
  };
  pad = find_special({"<pad>", "[PAD]"});
  unk = find_special({"<unk>", "[UNK]"});
  bos = find_special({"<bos>", "<s>", "[CLS]"});
  eos = find_special({"<eos>", "</s>", "[SEP]", "<|endoftext|>"});
  apply_config_and_pipeline();
  if (!template_from_file && !pipeline && !spm) {
    prefix.clear();
    suffix.clear();
    if (bos >= 0) prefix.push_back(bos);
    if (eos >= 0) suffix.push_back(eos);
  }
  if (kind == TokenizerKind::bpe) {
    TFM_CHECK(token_bytes.size() == n, where, "internal: token_bytes size");
    bpe.byte_id.fill(-1);
    for (int b = 0; b < 256; ++b) {
      auto it = token_ids.find(tok::bytes_to_token_text(std::string(1, static_cast<char>(b))));
      if (it != token_ids.end() && !special[it->second]) bpe.byte_id[b] = it->second;
    }
    bpe.serial = tok::next_model_serial();
  }
}

std::int32_t Tokenizer::Impl::lookup_or_unk(std::string_view token) const {
  auto it = token_ids.find(token);
  if (it != token_ids.end()) return it->second;
  TFM_CHECK(unk >= 0, "tokenizer", "'", token, "' is not in the vocabulary and there is no <unk> token");
  return unk;
}

void Tokenizer::Impl::encode_plain(std::string_view text, std::vector<std::int32_t>& out) const {
  if (text.empty()) return;
  thread_local std::vector<Span> spans;
  spans.clear();
  switch (kind) {
    case TokenizerKind::bpe:
      if (isolate_cjk)
        tok::cjk_isolated_gpt2_split(text, spans);
      else
        tok::gpt2_split(text, spans);
      for (const Span& s : spans) bpe.encode_word_cached(text.substr(s.begin, s.end - s.begin), out);
      return;
    case TokenizerKind::word_level: tok::whitespace_split(text, spans); break;
    case TokenizerKind::char_level: tok::codepoint_split(text, spans); break;
    case TokenizerKind::pipeline:
    case TokenizerKind::sentencepiece:
    case TokenizerKind::wordpiece:
    case TokenizerKind::unigram: return encode_other(text, false, out);
  }
  for (const Span& s : spans) out.push_back(lookup_or_unk(text.substr(s.begin, s.end - s.begin)));
}

void Tokenizer::Impl::encode_into(std::string_view text, bool add_special, std::vector<std::int32_t>& out) const {
  if (kind == TokenizerKind::pipeline || kind == TokenizerKind::sentencepiece) return encode_other(text, add_special, out);
  if (add_special) out.insert(out.end(), prefix.begin(), prefix.end());
  std::size_t start = 0;
  if (!added.empty()) {
    // Leftmost-longest match of the added tokens; the text between goes to the model.
    for (std::size_t i = 0; i < text.size(); ++i) {
      if (!added_first_byte[static_cast<unsigned char>(text[i])]) continue;
      for (const auto& a : added) {
        if (text.compare(i, a.content.size(), a.content) != 0) continue;
        encode_plain(text.substr(start, i - start), out);
        out.push_back(a.id);
        start = i + a.content.size();
        i = start - 1;
        break;
      }
    }
  }
  encode_plain(text.substr(start), out);
  if (add_special) out.insert(out.end(), suffix.begin(), suffix.end());
}

Tokenizer make_tokenizer(Tokenizer::Impl&& impl) {
  return Tokenizer(std::make_shared<const Tokenizer::Impl>(std::move(impl)));
}

// ---- Tokenizer -------------------------------------------------------------------------
Tokenizer::Tokenizer() : impl_(std::make_shared<const Impl>()) {}
Tokenizer::Tokenizer(std::shared_ptr<const Impl> impl) : impl_(std::move(impl)) {}

Tokenizer Tokenizer::train(const std::vector<std::string>& corpus, const TokenizerTrainOptions& opts) {
  if (opts.kind == TokenizerKind::bpe) return make_tokenizer(tok::train_bpe(corpus, opts));
  if (opts.kind == TokenizerKind::wordpiece) return tokenizer_from_json(tok::train_wordpiece_doc(corpus, opts));
  if (opts.kind == TokenizerKind::unigram) return tokenizer_from_json(tok::train_unigram_doc(corpus, opts));
  TFM_CHECK(!opts.isolate_cjk, "tokenizer train", "isolate_cjk applies to byte-level BPE only, not ",
            tokenizer_kind_name(opts.kind));
  return make_tokenizer(tok::train_vocab(corpus, opts));
}

Tokenizer Tokenizer::train_files(const std::vector<std::string>& paths, const TokenizerTrainOptions& opts) {
  TFM_CHECK(!paths.empty(), "tokenizer train", "no input files");
  // Each line is one training text (the newline is not part of it).
  std::vector<std::string> corpus;
  for (const auto& p : paths) {
    std::istringstream in(tok::read_file(p, "tokenizer train"));
    std::string line;
    while (std::getline(in, line)) corpus.push_back(std::move(line));
  }
  return train(corpus, opts);
}


Tokenizer Tokenizer::from_gpt2_files(const std::string& encoder_json, const std::string& vocab_bpe) {
  return make_tokenizer(tok::impl_from_gpt2_files(encoder_json, vocab_bpe));
}

Tokenizer Tokenizer::load(const std::string& path) { return load_tokenizer(path); }

std::string Tokenizer::to_json() const {
  if (impl_->source_json) return *impl_->source_json;
  TFM_CHECK(impl_->kind != TokenizerKind::sentencepiece, "tokenizer save",
            "a SentencePiece .model tokenizer is saved as its .model file, not tokenizer.json");
  return tok::impl_to_json(*impl_);
}

void Tokenizer::save(const std::string& path) const {
  namespace fs = std::filesystem;
  std::error_code ec;
  const std::string file = fs::is_directory(path, ec) ? (fs::path(path) / "tokenizer.json").string() : path;
  const std::string text = to_json();
  std::ofstream out(file, std::ios::binary);
  TFM_CHECK(out.good(), "tokenizer save", "cannot open ", file, " for writing");
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  TFM_CHECK(out.good(), "tokenizer save", "write to ", file, " failed");
}

std::vector<std::int32_t> Tokenizer::encode(std::string_view text, bool add_special) const {
  std::vector<std::int32_t> out;
  out.reserve(text.size() / 3 + 4);
  impl_->encode_into(text, add_special, out);
  return out;
}

std::vector<std::vector<std::int32_t>> Tokenizer::encode_batch(const std::vector<std::string>& texts,
                                                               bool add_special) const {
  std::vector<std::vector<std::int32_t>> out(texts.size());
  const auto n = static_cast<std::int64_t>(texts.size());
  std::string first_error;
#pragma omp parallel for schedule(dynamic, 16) num_threads(num_threads())
  for (std::int64_t b = 0; b < n; ++b) {
    try {
      impl_->encode_into(texts[b], add_special, out[b]);
    } catch (const std::exception& e) {
#pragma omp critical(tfm_tokenizer_error)
      if (first_error.empty()) first_error = e.what();
    }
  }
  TFM_CHECK(first_error.empty(), "tokenizer", first_error);
  return out;
}

std::string Tokenizer::decode(std::span<const std::int32_t> ids, bool skip_special) const {
  const Impl& m = *impl_;
  if (m.kind == TokenizerKind::pipeline || m.kind == TokenizerKind::sentencepiece) return m.decode_other(ids, skip_special);
  std::string out;
  bool first = true;
  for (std::int32_t id : ids) {
    TFM_CHECK(id >= 0 && static_cast<std::size_t>(id) < m.tokens.size(), "tokenizer decode", "id ", id,
              " out of range [0, ", m.tokens.size(), ")");
    if (skip_special && m.special[id]) continue;
    if (m.kind == TokenizerKind::word_level && !first) out += ' ';
    out += m.kind == TokenizerKind::bpe ? m.token_bytes[id] : m.tokens[id];
    first = false;
  }
  return out;
}

std::vector<std::string> Tokenizer::tokenize(std::string_view text) const {
  if (impl_->kind == TokenizerKind::pipeline) return encode_full(text).tokens;
  std::vector<std::string> out;
  for (std::int32_t id : encode(text)) out.push_back(impl_->tokens[id]);
  return out;
}

TokenizerKind Tokenizer::kind() const { return impl_->kind; }
std::int64_t Tokenizer::vocab_size() const { return static_cast<std::int64_t>(impl_->tokens.size()); }
std::string Tokenizer::id_to_token(std::int32_t id) const {
  TFM_CHECK(id >= 0 && static_cast<std::size_t>(id) < impl_->tokens.size(), "tokenizer", "id ", id,
            " out of range [0, ", impl_->tokens.size(), ")");
  return impl_->tokens[id];
}
std::int32_t Tokenizer::token_to_id(std::string_view token) const {
  auto it = impl_->token_ids.find(token);
  return it == impl_->token_ids.end() ? -1 : it->second;
}
bool Tokenizer::is_special(std::int32_t id) const {
  return id >= 0 && static_cast<std::size_t>(id) < impl_->special.size() && impl_->special[id];
}
std::int32_t Tokenizer::pad_id() const { return impl_->pad; }
std::int32_t Tokenizer::unk_id() const { return impl_->unk; }
std::int32_t Tokenizer::bos_id() const { return impl_->bos; }
std::int32_t Tokenizer::eos_id() const { return impl_->eos; }
std::int64_t Tokenizer::num_merges() const { return static_cast<std::int64_t>(impl_->bpe.merge_list.size()); }

}  // namespace tfm
