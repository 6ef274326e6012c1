// Encode throughput of real tokenizer files (Llama-3, Qwen3, Llama-2, a trained BERT
// WordPiece) on tinyshakespeare.txt and cmn-eng.tsv (one text per line): MB/s on 1 thread
// (encode line by line) and batched on 2 threads (encode_batch), best of 3 passes after a
// warm-up pass. bench/tokenizers/bench_tokenizers.sh runs it beside HF tokenizers (npm) on the same
// inputs and prints both; docs/benchmarks.md has the figures.
//   build/bin/bench_hf_tokenizers NAME=PATH...   (run from the repo root)
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <fstream>
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

double seconds(const auto& fn) {
  double best = 1e30;
  fn();  // warm-up (fills the per-thread caches, as a long-running process has them)
  for (int r = 0; r < 3; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const char* files[] = {"tinyshakespeare.txt", "cmn-eng.tsv"};
  std::printf("%-16s %-20s %12s %14s %8s\n", "tokenizer", "data", "1 thread MB/s", "2 threads MB/s", "tokens");
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    const auto eq = arg.find('=');
    const std::string name = arg.substr(0, eq), path = arg.substr(eq + 1);
    const tfm::Tokenizer tok = tfm::load_tokenizer(path);
    for (const char* f : files) {
      const auto lines = lines_of(f);
      double mb = 0;
      for (const auto& l : lines) mb += static_cast<double>(l.size()) / 1e6;
      std::size_t ntok = 0;
      tfm::set_num_threads(1);
      const double one = seconds([&] {
        ntok = 0;
        for (const auto& l : lines) ntok += tok.encode(l).size();
      });
      tfm::set_num_threads(2);
      const double two = seconds([&] { benchmark::DoNotOptimize(tok.encode_batch(lines)); });
      std::printf("%-16s %-20s %12.2f %14.2f %8zu\n", name.c_str(), f, mb / one, mb / two, ntok);
      std::fflush(stdout);
    }
  }
  return 0;
}
