// Factories of the pipeline components (one family per file); pipeline_load.cpp reads
// their parameters from tokenizer.json and calls these.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenize/pipeline.h"
#include "tokenize/uprops.h"

namespace tfm::tok {

// ---- normalizers (normalizer_*.cpp) ----
std::unique_ptr<Normalizer> make_unicode_normalizer(uprops::Form form);
std::unique_ptr<Normalizer> make_lowercase();
std::unique_ptr<Normalizer> make_strip_accents();
std::unique_ptr<Normalizer> make_strip(bool left, bool right);
// regex empty: pattern is a literal string.
std::unique_ptr<Normalizer> make_replace(const std::string& literal, const std::string& regex, const std::string& content);
std::unique_ptr<Normalizer> make_prepend(const std::string& prefix);
std::unique_ptr<Normalizer> make_normalizer_sequence(std::vector<std::unique_ptr<Normalizer>> parts);
std::unique_ptr<Normalizer> make_bert_normalizer(bool clean_text, bool handle_chinese_chars, bool strip_accents,
                                                 bool lowercase);
// SentencePiece's precompiled_charsmap (base64-decoded bytes); empty -> identity.
std::unique_ptr<Normalizer> make_precompiled(const std::string& charsmap);

// ---- pre-tokenizers (pre_tokenizer_*.cpp) ----
std::unique_ptr<PreTokenizer> make_byte_level_pre(bool add_prefix_space, bool use_regex);
std::unique_ptr<PreTokenizer> make_split(const std::string& literal, const std::string& regex, SplitBehavior behavior,
                                         bool invert);
std::unique_ptr<PreTokenizer> make_whitespace();
std::unique_ptr<PreTokenizer> make_whitespace_split();
std::unique_ptr<PreTokenizer> make_bert_pre();
enum class PrependScheme { always, first, never };
std::unique_ptr<PreTokenizer> make_metaspace(std::uint32_t replacement, PrependScheme scheme, bool split);
std::unique_ptr<PreTokenizer> make_punctuation(SplitBehavior behavior);
std::unique_ptr<PreTokenizer> make_digits(bool individual);
std::unique_ptr<PreTokenizer> make_char_delimiter(std::uint32_t delimiter);
std::unique_ptr<PreTokenizer> make_pre_sequence(std::vector<std::unique_ptr<PreTokenizer>> parts);

// ---- models (model_*.cpp) ----
struct BpeOptions {
  std::string unk_token, continuing_subword_prefix, end_of_word_suffix;
  bool has_unk = false, fuse_unk = false, byte_fallback = false, ignore_merges = false;
};
std::unique_ptr<Model> make_bpe(std::vector<std::string> vocab, const std::vector<std::pair<std::string, std::string>>& merges,
                                const BpeOptions& opts, const char* where);
std::unique_ptr<Model> make_wordpiece(std::vector<std::string> vocab, const std::string& unk_token,
                                      const std::string& prefix, std::size_t max_input_chars_per_word, const char* where);
std::unique_ptr<Model> make_unigram(std::vector<std::string> vocab, std::vector<double> scores, std::int32_t unk_id,
                                    bool byte_fallback, const char* where);
std::unique_ptr<Model> make_wordlevel(std::vector<std::string> vocab, const std::string& unk_token, const char* where);

// ---- post-processors (post_processor*.cpp) ----
struct TemplatePiece {
  bool is_sequence = false;  // Sequence A/B or SpecialToken
  int sequence = 0;          // 0 = A, 1 = B
  std::vector<std::int32_t> ids;
  std::vector<std::string> tokens;
  std::int32_t type_id = 0;
};
std::unique_ptr<PostProcessor> make_template(std::vector<TemplatePiece> single, std::vector<TemplatePiece> pair);
std::unique_ptr<PostProcessor> make_bert_processing(std::pair<std::string, std::int32_t> sep,
                                                    std::pair<std::string, std::int32_t> cls);
std::unique_ptr<PostProcessor> make_roberta_processing(std::pair<std::string, std::int32_t> sep,
                                                       std::pair<std::string, std::int32_t> cls, bool trim_offsets,
                                                       bool add_prefix_space);
std::unique_ptr<PostProcessor> make_byte_level_post(bool trim_offsets);
std::unique_ptr<PostProcessor> make_post_sequence(std::vector<std::unique_ptr<PostProcessor>> parts);
// No post-processor: concatenation of the sequences (type ids 0 and 1).
Encoding default_process(Encoding a, const Encoding* b);
// ByteLevel's offset trimming (also used by RobertaProcessing).
void trim_byte_level_offsets(Encoding& e, bool add_prefix_space);

// ---- decoders (decoder*.cpp) ----
std::unique_ptr<Decoder> make_byte_level_decoder();
std::unique_ptr<Decoder> make_metaspace_decoder(std::uint32_t replacement, PrependScheme scheme);
std::unique_ptr<Decoder> make_wordpiece_decoder(const std::string& prefix, bool cleanup);
std::unique_ptr<Decoder> make_byte_fallback_decoder();
std::unique_ptr<Decoder> make_fuse_decoder();
std::unique_ptr<Decoder> make_strip_decoder(std::uint32_t content, std::size_t start, std::size_t stop);
std::unique_ptr<Decoder> make_replace_decoder(const std::string& literal, const std::string& regex,
                                              const std::string& content);
std::unique_ptr<Decoder> make_bpe_decoder(const std::string& suffix);
std::unique_ptr<Decoder> make_ctc_decoder(const std::string& pad_token, const std::string& word_delimiter, bool cleanup);
std::unique_ptr<Decoder> make_decoder_sequence(std::vector<std::unique_ptr<Decoder>> parts);

}  // namespace tfm::tok
