// GGUF files written by the engine run in llama.cpp (node-llama-cpp's prebuilt binaries)
// with the same prompt tokens, next-token logits (compared as log-softmax, which is what
// node-llama-cpp returns: max |diff| <= 1e-3 of the logit range) and greedy continuation as
// in the engine. The reference JSON files are written at test
// time by make_reference.sh.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tfm/gguf_model.h"
#include "tfm/tfm.h"

using namespace tfm;

namespace {

const std::vector<std::int64_t> kIds = {5, 72, 101, 108, 108, 111, 258, 262, 263, 32, 120};

std::string fixture(const std::string& name) {
  const char* dir = std::getenv("TFM_FIXTURE_DIR");
  return std::string(dir ? dir : "fixtures") + "/" + name;
}

std::vector<float> last_logits(Model& m, const std::vector<std::int64_t>& ids) {
  ModelInputs in;
  in.input_ids = Tensor::from_ints(ids, {1, static_cast<std::int64_t>(ids.size())});
  const Tensor logits = m.forward(in).logits;  // (1, T, V)
  const std::vector<float> all = logits.to_floats();
  const std::int64_t V = logits.size(-1);
  return std::vector<float>(all.end() - V, all.end());
}

void check(const std::string& arch) {
  std::ifstream in(fixture("llamacpp_" + arch + ".json"));
  ASSERT_TRUE(in.good()) << "missing llama.cpp reference for " << arch;
  const auto ref = nlohmann::json::parse(in);
  LoadedModel m = load_gguf_model(fixture("tfm_" + arch + ".gguf"));

  std::vector<std::int32_t> want_prompt = ref.at("prompt_tokens").get<std::vector<std::int32_t>>();
  EXPECT_EQ(m.tokenizer.encode("hello the world"), want_prompt) << arch << " prompt tokens";

  std::vector<float> ours = last_logits(m.model, kIds);
  const std::vector<double> theirs = ref.at("logprobs").get<std::vector<double>>();
  ASSERT_EQ(ours.size(), theirs.size());
  double mx = ours[0], sum = 0;
  for (float v : ours) mx = std::max(mx, double(v));
  for (float v : ours) sum += std::exp(double(v) - mx);
  const double lse = mx + std::log(sum);
  for (float& v : ours) v = static_cast<float>(double(v) - lse);  // log-softmax
  const auto [lo, hi] = std::minmax_element(theirs.begin(), theirs.end());
  double max_diff = 0;
  for (std::size_t i = 0; i < ours.size(); ++i) max_diff = std::max(max_diff, std::abs(double(ours[i]) - theirs[i]));
  std::printf("%s: max |tfm - llama.cpp| logit difference %.3g, logit range %.3g\n", arch.c_str(), max_diff,
              double(*hi - *lo));
  EXPECT_LE(max_diff, 1e-3 * (*hi - *lo)) << arch << ": max |tfm - llama.cpp| logit difference " << max_diff
                                          << " over a range of " << (*hi - *lo);

  std::vector<std::int64_t> seq = kIds, greedy;
  for (int k = 0; k < 8; ++k) {
    const std::vector<float> l = last_logits(m.model, seq);
    const std::int64_t next = std::max_element(l.begin(), l.end()) - l.begin();
    greedy.push_back(next);
    seq.push_back(next);
  }
  EXPECT_EQ(greedy, ref.at("greedy").get<std::vector<std::int64_t>>()) << arch << " greedy continuation";
}

}  // namespace

TEST(LlamaCppParity, LlamaExportMatchesLlamaCpp) { check("llama"); }
TEST(LlamaCppParity, Qwen2ExportMatchesLlamaCpp) { check("qwen2"); }
TEST(LlamaCppParity, Gpt2ExportMatchesLlamaCpp) { check("gpt2"); }
// Models trained here (make_reference.sh), exported with tfm convert.
TEST(LlamaCppParity, TrainedLlamaRunsInLlamaCpp) { check("trained-llama"); }
TEST(LlamaCppParity, TrainedGpt2RunsInLlamaCpp) { check("trained-gpt2"); }
