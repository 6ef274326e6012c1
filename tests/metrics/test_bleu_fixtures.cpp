// BLEU and chrF against the figures sacreBLEU 2.6.0 printed (data/bleu-fixtures/: every
// tokenizer x smoothing method x one/two references on English, Chinese and European-language
// sets, and chrF2). Every figure must agree to 1e-9: sacreBLEU rounds only when printing.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tfm/metrics.h"

namespace {

using namespace tfm::metrics;
using json = nlohmann::json;

std::string fixture_dir() {
  const char* src = std::getenv("TFM_SOURCE_DIR");
  return std::string(src ? src : TFM_SOURCE_DIR_DEFAULT) + "/data/bleu-fixtures/";
}

// Lines as sacreBLEU's command line reads them: split at '\n', trailing whitespace kept here
// (BLEU strips it itself; these files have none).
std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path;
  std::vector<std::string> out;
  std::string line;
  while (std::getline(in, line)) out.push_back(line);
  return out;
}

json expected() {
  std::ifstream in(fixture_dir() + "expected.json");
  return json::parse(in);
}

struct Inputs {
  std::vector<std::string> hyps;
  std::vector<std::vector<std::string>> refs;
};

Inputs inputs(const json& e) {
  const std::string dir = fixture_dir() + e["set"].get<std::string>() + "/";
  Inputs in{read_lines(dir + "hyp.txt"), {}};
  for (const auto& r : e["references"]) in.refs.push_back(read_lines(dir + r.get<std::string>()));
  return in;
}

TEST(SacreBleuFixtures, EveryBleuFigureMatches) {
  // The statistics depend on the set, tokenizer and references only: computed once for the
  // four smoothing methods of each (bleu_statistics), scored per method (bleu_from_statistics);
  // the first of each group also goes through corpus_bleu as a whole.
  std::map<std::string, BleuStatistics> stats;
  int checked = 0;
  for (const auto& e : expected()) {
    if (e.contains("metric")) continue;
    BleuOptions o;
    o.tokenize = bleu_tokenizer_from_name(e["tokenize"].get<std::string>());
    o.smooth = bleu_smooth_from_name(e["smooth_method"].get<std::string>());
    if (!e["smooth_value"].is_null()) o.smooth_value = e["smooth_value"].get<double>();
    const std::string key = e["set"].get<std::string>() + "/" + e["tokenize"].get<std::string>() + "/" + e["references"].dump();
    BleuScore s;
    if (!stats.count(key)) {
      const Inputs in = inputs(e);
      stats[key] = bleu_statistics(in.hyps, in.refs, o);
      s = corpus_bleu(in.hyps, in.refs, o);
    } else {
      s = bleu_from_statistics(stats[key], o);
    }
    const std::string what = e["set"].get<std::string>() + " " + e["signature"].get<std::string>();
    EXPECT_NEAR(s.score, e["score"].get<double>(), 1e-9) << what;
    EXPECT_NEAR(s.bp, e["bp"].get<double>(), 1e-9) << what;
    EXPECT_EQ(s.sys_len, e["sys_len"].get<std::int64_t>()) << what;
    EXPECT_EQ(s.ref_len, e["ref_len"].get<std::int64_t>()) << what;
    EXPECT_EQ(s.signature, e["signature"].get<std::string>()) << what;
    ASSERT_EQ(s.counts.size(), 4u);
    for (std::size_t n = 0; n < 4; ++n) {
      EXPECT_NEAR(s.counts[n], e["counts"][n].get<double>(), 1e-9) << what << " order " << n + 1;
      EXPECT_NEAR(s.totals[n], e["totals"][n].get<double>(), 1e-9) << what << " order " << n + 1;
      EXPECT_NEAR(s.precisions[n], e["precisions"][n].get<double>(), 1e-9) << what << " order " << n + 1;
    }
    ++checked;
  }
  EXPECT_EQ(checked, 120);  // 3 sets x 5 tokenizers x 4 smoothing methods x 1 or 2 references
  EXPECT_EQ(stats.size(), 30u);
}

TEST(SacreBleuFixtures, EveryChrfFigureMatches) {
  int checked = 0;
  for (const auto& e : expected()) {
    if (!e.contains("metric")) continue;
    ASSERT_EQ(e["metric"], "chrF2");
    const Inputs in = inputs(e);
    const ChrfScore s = corpus_chrf(in.hyps, in.refs);
    EXPECT_NEAR(s.score, e["score"].get<double>(), 1e-9) << e["set"] << " " << e["references"].size() << " refs";
    EXPECT_EQ(s.signature, e["signature"].get<std::string>());
    EXPECT_EQ(s.name, "chrF2");
    ++checked;
  }
  EXPECT_EQ(checked, 6);
}

TEST(SacreBleuFixtures, PrintedLineHasSacreBleusLayout) {
  // The en / 13a / exp / one reference entry, printed as sacreBLEU's text format prints it
  // (precisions 95.7/75.0/63.5/54.8, BP 0.842, hyp_len 1849, ref_len 2166 from the fixture).
  const json all = expected();
  const json& e = all[0];
  ASSERT_EQ(e["tokenize"], "13a");
  const Inputs in = inputs(e);
  EXPECT_EQ(corpus_bleu(in.hyps, in.refs).format(2),
            "BLEU|nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0 = 59.56 95.7/75.0/63.5/54.8 "
            "(BP = 0.842 ratio = 0.854 hyp_len = 1849 ref_len = 2166)");
}

}  // namespace
