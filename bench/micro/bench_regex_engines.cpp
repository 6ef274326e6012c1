// Regex engine choice for Split pre-tokenizers (docs/tokenizers.md): Oniguruma, the engine HF
// tokenizers uses, against PCRE2 (interpreted and JIT) on Llama-3's pattern, over every line
// of tinyshakespeare.txt and cmn-eng.tsv. Each also counts the lines where its matches differ
// from Oniguruma's ("diff_lines"; 0 means the engines split identically on this text).
//   build/bin/bench_regex_engines --benchmark_counters_tabular=true   (run from the repo root)
#define PCRE2_CODE_UNIT_WIDTH 8
#include <benchmark/benchmark.h>
#include <pcre2.h>

#include <fstream>
#include <string>
#include <vector>

#include "tokenize/regex.h"

namespace {

const char* kLlama3 =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";

std::vector<std::string> lines_of(const std::string& file) {
  std::ifstream in("data/" + file, std::ios::binary);
  std::vector<std::string> lines;
  std::string l;
  while (std::getline(in, l)) lines.push_back(l);
  return lines;
}

std::size_t bytes_of(const std::vector<std::string>& v) {
  std::size_t n = 0;
  for (const auto& s : v) n += s.size();
  return n;
}

using Spans = std::vector<tfm::tok::Range>;

Spans onig_spans(const tfm::tok::Regex& re, const std::string& s) {
  Spans out;
  re.find_all(s, out);
  return out;
}

struct Pcre {
  pcre2_code* code = nullptr;
  pcre2_match_data* md = nullptr;
  explicit Pcre(bool jit) {
    int err = 0;
    PCRE2_SIZE off = 0;
    code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kLlama3), PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err, &off,
                         nullptr);
    if (jit) pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    md = pcre2_match_data_create_from_pattern(code, nullptr);
  }
  ~Pcre() {
    pcre2_match_data_free(md);
    pcre2_code_free(code);
  }
  Spans spans(const std::string& s) const {
    Spans out;
    PCRE2_SIZE pos = 0;
    while (pos <= s.size()) {
      const int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), pos, 0, md, nullptr);
      if (rc < 0) break;
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      out.push_back({static_cast<std::uint32_t>(ov[0]), static_cast<std::uint32_t>(ov[1])});
      if (ov[1] > ov[0]) {
        pos = ov[1];
      } else {  // empty match (the pattern has none on real text): step one char
        pos = ov[1] + 1;
        while (pos < s.size() && (static_cast<unsigned char>(s[pos]) & 0xC0) == 0x80) ++pos;
      }
    }
    return out;
  }
};

void BM_Oniguruma(benchmark::State& state, const char* file) {
  const auto lines = lines_of(file);
  const tfm::tok::Regex re(kLlama3, "bench");
  for (auto _ : state)
    for (const auto& l : lines) benchmark::DoNotOptimize(onig_spans(re, l));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes_of(lines)));
  state.counters["diff_lines"] = 0;
}

void BM_Pcre2(benchmark::State& state, const char* file, bool jit) {
  const auto lines = lines_of(file);
  const tfm::tok::Regex re(kLlama3, "bench");
  const Pcre p(jit);
  double diff = 0;
  for (const auto& l : lines) diff += !(p.spans(l) == onig_spans(re, l));
  for (auto _ : state)
    for (const auto& l : lines) benchmark::DoNotOptimize(p.spans(l));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes_of(lines)));
  state.counters["diff_lines"] = diff;
}

BENCHMARK_CAPTURE(BM_Oniguruma, shakespeare, "tinyshakespeare.txt")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Pcre2, shakespeare_interp, "tinyshakespeare.txt", false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Pcre2, shakespeare_jit, "tinyshakespeare.txt", true)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Oniguruma, cmn_eng, "cmn-eng.tsv")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Pcre2, cmn_eng_interp, "cmn-eng.tsv", false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Pcre2, cmn_eng_jit, "cmn-eng.tsv", true)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
