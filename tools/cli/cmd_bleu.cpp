// tfm bleu REF [HYP] [--ref REF2 ...] [--tokenize T] [--smooth S] [-m bleu chrf] [--json]
// Scores a hypothesis file (stdin when HYP is absent) against one or more reference files,
// one segment a line, as the sacrebleu command line does (lines read with trailing whitespace
// stripped): corpus BLEU and chrF2, each printed with its sacreBLEU signature. Bytes that are
// not UTF-8 are scored as U+FFFD, with a warning on stderr.
#include <cstdio>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "commands.h"
#include "tfm/error.h"
#include "tfm/metrics.h"

namespace tfm::cli {

void add_bleu_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("bleu", "Corpus BLEU and chrF of a hypothesis file against references (= sacreBLEU 2.6.0)");
  struct Args {
    std::string ref, hyp = "-", tokenize = "auto", smooth = "exp";
    std::vector<std::string> more_refs, metrics{"bleu", "chrf"};
    double smooth_value = -1;
    int width = 1, chrf_word_order = 0;
    bool lowercase = false, effective_order = false, json = false, score_only = false;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("REF", a->ref, "Reference file, one segment a line")->required();
  cmd->add_option("HYP", a->hyp, "Hypothesis file (default: stdin)");
  cmd->add_option("-r,--ref", a->more_refs, "Further reference files (several references per segment)");
  cmd->add_option("--tokenize,--tok", a->tokenize,
                  "BLEU tokenizer: 13a, intl, zh, char, none, or auto (zh for Chinese references, else 13a)")
      ->check(CLI::IsMember({"auto", "13a", "intl", "zh", "char", "none"}));
  cmd->add_option("-s,--smooth", a->smooth, "BLEU smoothing: exp, floor, add-k, none")
      ->check(CLI::IsMember({"exp", "floor", "add-k", "none"}));
  cmd->add_option("--smooth-value", a->smooth_value, "floor: the floor (0.1); add-k: k (1)")->check(CLI::NonNegativeNumber);
  cmd->add_flag("--lc,--lowercase", a->lowercase, "Case-insensitive scores");
  cmd->add_flag("-e,--effective-order", a->effective_order, "BLEU: average only the n-gram orders present");
  cmd->add_option("-m,--metrics", a->metrics, "Metrics to print: bleu, chrf (default: both)")
      ->check(CLI::IsMember({"bleu", "chrf"}));
  cmd->add_option("--chrf-word-order", a->chrf_word_order, "chrF word n-gram order (2: chrF++)")->check(CLI::Range(0, 10));
  cmd->add_option("-w,--width", a->width, "Decimals printed (default 1, as sacrebleu)")->check(CLI::Range(0, 16));
  cmd->add_flag("-b,--score-only", a->score_only, "Print the scores only");
  cmd->add_flag("--json", a->json, "One JSON object per metric (full precision, counts, signature)");
  cmd->callback([a] {
    const auto read = [](const std::string& path) {
      std::ifstream file;
      if (path != "-") {
        file.open(path, std::ios::binary);
        TFM_CHECK(file.good(), path, "cannot open the file");
      }
      std::istream& in = path == "-" ? std::cin : file;
      std::vector<std::string> lines;
      std::size_t invalid = 0, first_invalid = 0;
      for (std::string line; std::getline(in, line);) {
        const std::string clean = metrics::valid_utf8(line);
        if (clean != line && invalid++ == 0) first_invalid = lines.size() + 1;
        lines.push_back(metrics::rstrip_whitespace(clean));
      }
      // Byte-level BPE models can emit a byte sequence that is not UTF-8 (tfm translate prints
      // what the model wrote): score it as Python's decode(errors='replace') would read it.
      if (invalid > 0)
        std::fprintf(stderr,
                     "tfm bleu: warning: %s: %zu line(s) are not valid UTF-8 (the first: line %zu); each invalid byte "
                     "sequence counts as U+FFFD\n",
                     path == "-" ? "stdin" : path.c_str(), invalid, first_invalid);
      return lines;
    };
    const std::vector<std::string> hyps = read(a->hyp);
    std::vector<std::vector<std::string>> refs;
    std::vector<std::string> ref_paths{a->ref};
    ref_paths.insert(ref_paths.end(), a->more_refs.begin(), a->more_refs.end());
    for (const auto& p : ref_paths) {
      refs.push_back(read(p));
      TFM_CHECK(refs.back().size() == hyps.size(), "bleu", p, " has ", refs.back().size(), " lines but the hypotheses (",
                a->hyp == "-" ? "stdin" : a->hyp, ") have ", hyps.size());
    }
    TFM_CHECK(!hyps.empty(), "bleu", "no hypotheses to score");
    for (const auto& m : a->metrics) {
      if (m == "bleu") {
        metrics::BleuOptions o;
        o.tokenize = a->tokenize == "auto" ? metrics::default_bleu_tokenizer(refs[0]) : metrics::bleu_tokenizer_from_name(a->tokenize);
        o.smooth = metrics::bleu_smooth_from_name(a->smooth);
        if (a->smooth_value >= 0) o.smooth_value = a->smooth_value;
        o.lowercase = a->lowercase;
        o.effective_order = a->effective_order;
        const auto s = metrics::corpus_bleu(hyps, refs, o);
        if (a->json) {
          nlohmann::json j{{"name", "BLEU"}, {"score", s.score}, {"signature", s.signature}, {"verbose_score", s.verbose()},
                           {"counts", s.counts}, {"totals", s.totals}, {"precisions", s.precisions}, {"bp", s.bp},
                           {"sys_len", s.sys_len}, {"ref_len", s.ref_len}};
          std::printf("%s\n", j.dump().c_str());
        } else if (a->score_only) {
          std::printf("%.*f\n", a->width, s.score);
        } else {
          std::printf("%s\n", s.format(a->width).c_str());
        }
      } else {
        metrics::ChrfOptions o;
        o.lowercase = a->lowercase;
        o.word_order = a->chrf_word_order;
        const auto s = metrics::corpus_chrf(hyps, refs, o);
        if (a->json) {
          std::printf("%s\n", nlohmann::json{{"name", s.name}, {"score", s.score}, {"signature", s.signature}}.dump().c_str());
        } else if (a->score_only) {
          std::printf("%.*f\n", a->width, s.score);
        } else {
          std::printf("%s\n", s.format(a->width).c_str());
        }
      }
    }
  });
}

}  // namespace tfm::cli
