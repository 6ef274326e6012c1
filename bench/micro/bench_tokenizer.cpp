// Tokenizer throughput: GPT-2 encode in MB/s on tinyshakespeare.txt and cmn-eng.tsv (one
// text per line), single thread and batched over threads; BPE training time.
//   build/bin/bench_tokenizer --benchmark_counters_tabular=true   (run from the repo root)
// tools/reference/tiktoken/bench.js measures tiktoken on the same inputs.
#include <benchmark/benchmark.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tfm/runtime.h"
#include "tfm/tokenizer.h"

namespace {

std::vector<std::string> lines_of(const std::string& file) {
  std::ifstream in("data/" + file, std::ios::binary);
  std::vector<std::string> lines;
  std::string l;
  while (std::getline(in, l)) lines.push_back(l);
  return lines;
}
const tfm::Tokenizer& gpt2() {
  static const tfm::Tokenizer t = tfm::Tokenizer::load("data/gpt2-tokenizer");
  return t;
}
std::size_t bytes_of(const std::vector<std::string>& v) {
  std::size_t n = 0;
  for (const auto& s : v) n += s.size() + 1;
  return n;
}

// Fresh words each iteration would defeat the per-thread word cache; real use keeps one
// tokenizer for a whole corpus, so the cache is warm after the first pass as it is here.
void BM_Encode(benchmark::State& state, const char* file) {
  const auto lines = lines_of(file);
  tfm::set_num_threads(1);
  for (auto _ : state)
    for (const auto& l : lines) benchmark::DoNotOptimize(gpt2().encode(l));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes_of(lines)));
}

void BM_EncodeBatch(benchmark::State& state, const char* file) {
  const auto lines = lines_of(file);
  tfm::set_num_threads(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(gpt2().encode_batch(lines));
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * bytes_of(lines)));
}

void BM_TrainBpe(benchmark::State& state) {
  const auto lines = lines_of("tinyshakespeare.txt");
  tfm::TokenizerTrainOptions opts;
  opts.vocab_size = state.range(0);
  std::int64_t got = 0;
  for (auto _ : state) got = tfm::Tokenizer::train(lines, opts).vocab_size();
  state.counters["vocab"] = static_cast<double>(got);
}

BENCHMARK_CAPTURE(BM_Encode, shakespeare, "tinyshakespeare.txt")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Encode, cmn_eng, "cmn-eng.tsv")->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_EncodeBatch, shakespeare, "tinyshakespeare.txt")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_EncodeBatch, cmn_eng, "cmn-eng.tsv")->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TrainBpe)->Arg(8000)->Arg(32000)->Unit(benchmark::kSecond)->Iterations(1);

}  // namespace

BENCHMARK_MAIN();
