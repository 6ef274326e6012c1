// The tokenizer files that came before tokenizer.json, each turned into the tokenizer.json
// document transformers' converters build from it (so the pipeline runs it as HF would).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "tfm/tokenizer.h"

namespace tfm::tok {

// vocab.json + merges.txt (GPT-2, RoBERTa: RobertaProcessing when tokenizer_class says so).
nlohmann::json bpe_doc_from_vocab_merges(const std::string& vocab_json, const std::string& merges_txt,
                                         const nlohmann::json& config);
// vocab.txt (BERT WordPiece; do_lower_case, strip_accents, tokenize_chinese_chars from config).
nlohmann::json wordpiece_doc_from_vocab_txt(const std::string& vocab_txt, const nlohmann::json& config);
// A SentencePiece .model (libsentencepiece encodes and decodes).
Tokenizer load_sentencepiece(const std::string& path, const TokenizerConfig& config);

}  // namespace tfm::tok
