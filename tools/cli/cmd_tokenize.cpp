// tfm tokenizer train | tfm tokenize | tfm detokenize — thin wrappers over tfm::Tokenizer
// (load_tokenizer: any supported file or model directory).
#include <chrono>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "commands.h"
#include "tfm/error.h"
#include "tfm/tokenizer.h"

namespace tfm::cli {

namespace {

struct TrainArgs {
  std::string type = "bpe";
  std::int64_t vocab_size = 0, min_freq = 0;
  bool isolate_cjk = false;
  std::vector<std::string> inputs, specials;
  std::string output = "tokenizer.json";
};

struct EncodeArgs {
  std::string tokenizer, text;
  bool ids = false, tokens = false, add_special = false;
};

std::vector<std::string> input_lines(const std::string& text, bool has_text) {
  std::vector<std::string> lines;
  if (has_text) return {text};
  std::string line;
  while (std::getline(std::cin, line)) lines.push_back(line);
  return lines;
}

}  // namespace

void add_tokenizer_commands(CLI::App& app) {
  auto* tok = app.add_subcommand("tokenizer", "Tokenizer tools");
  tok->require_subcommand(1);
  auto targs = std::make_shared<TrainArgs>();
  auto* train = tok->add_subcommand("train", "Train a char, word, byte-level BPE, WordPiece or Unigram tokenizer; writes tokenizer.json");
  train->add_option("--type", targs->type, "char | word | bpe | wordpiece (BERT's pipeline) | unigram (SentencePiece's)")
      ->check(CLI::IsMember({"char", "word", "bpe", "wordpiece", "unigram"}));
  train->add_option("--vocab-size", targs->vocab_size, "bpe/wordpiece/unigram: target size; char/word: cap (0 = all)");
  train->add_option("--min-freq", targs->min_freq, "drop tokens (char/word) or pairs (bpe) seen fewer times");
  train->add_flag("--isolate-cjk", targs->isolate_cjk,
                  "bpe: every Chinese character its own pre-token (BERT's rule): merges never join two");
  train->add_option("--input", targs->inputs, "training text files (one text per line)")->required()->expected(1, -1);
  train->add_option("--special", targs->specials, "extra special tokens, e.g. <cls> <sep> <mask>")->expected(0, -1);
  train->add_option("-o,--output", targs->output, "output tokenizer.json (or a directory)");
  train->callback([targs] {
    TokenizerTrainOptions opts;
    opts.kind = tokenizer_kind_from_name(targs->type);
    opts.vocab_size = targs->vocab_size;
    opts.min_freq = targs->min_freq;
    opts.isolate_cjk = targs->isolate_cjk;
    opts.extra_specials = targs->specials;
    const auto t0 = std::chrono::steady_clock::now();
    const Tokenizer t = Tokenizer::train_files(targs->inputs, opts);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    t.save(targs->output);
    const std::string merges =
        t.num_merges() > 0 ? " (" + std::to_string(t.num_merges()) + " merges)" : std::string();
    std::fprintf(stderr, "trained %s tokenizer: %lld tokens%s in %.2f s -> %s\n", targs->type.c_str(),
                 static_cast<long long>(t.vocab_size()), merges.c_str(), s, targs->output.c_str());
  });

  auto eargs = std::make_shared<EncodeArgs>();
  auto* enc = app.add_subcommand("tokenize", "Encode TEXT (or each stdin line) to ids or tokens");
  enc->add_option("--tokenizer", eargs->tokenizer,
                  "model directory or file: tokenizer.json, vocab.json (+ merges.txt), vocab.txt, *.model")
      ->required();
  enc->add_flag("--ids", eargs->ids, "print ids (default)");
  enc->add_flag("--tokens", eargs->tokens, "print token strings");
  enc->add_flag("--add-special", eargs->add_special,
                "add the tokenizer's special tokens (its post-processor / template) around each input");
  auto* text_opt = enc->add_option("text", eargs->text, "text to encode (default: each line of stdin)");
  enc->callback([eargs, text_opt] {
    const Tokenizer t = load_tokenizer(eargs->tokenizer);
    const auto lines = input_lines(eargs->text, text_opt->count() > 0);
    const auto all = t.encode_batch(lines, eargs->add_special);
    std::string out;
    for (const auto& ids : all) {
      for (std::size_t k = 0; k < ids.size(); ++k) {
        if (k) out += ' ';
        out += eargs->tokens ? t.id_to_token(ids[k]) : std::to_string(ids[k]);
      }
      out += '\n';
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
  });

  auto dargs = std::make_shared<EncodeArgs>();
  auto* dec = app.add_subcommand("detokenize", "Decode IDS (or each stdin line of ids) to text");
  dec->add_option("--tokenizer", dargs->tokenizer,
                  "model directory or file: tokenizer.json, vocab.json (+ merges.txt), vocab.txt, *.model")
      ->required();
  dec->add_flag("--skip-special", dargs->add_special, "drop special tokens");
  auto* ids_opt = dec->add_option("ids", dargs->text, "space-separated ids (default: each line of stdin)");
  dec->callback([dargs, ids_opt] {
    const Tokenizer t = load_tokenizer(dargs->tokenizer);
    for (const auto& line : input_lines(dargs->text, ids_opt->count() > 0)) {
      std::vector<std::int32_t> ids;
      std::istringstream in(line);
      std::string w;
      while (in >> w) {
        std::size_t used = 0;
        long long v = 0;
        try {
          v = std::stoll(w, &used);
        } catch (const std::exception&) {
          used = 0;
        }
        TFM_CHECK(used == w.size() && v >= INT32_MIN && v <= INT32_MAX, "detokenize", "'", w, "' is not an id");
        ids.push_back(static_cast<std::int32_t>(v));
      }
      const std::string text = t.decode(ids, dargs->add_special) + "\n";
      std::fwrite(text.data(), 1, text.size(), stdout);
    }
  });
}

}  // namespace tfm::cli
