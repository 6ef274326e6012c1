// Quantized GGUF files written by the engine (tfm quantize: q8_0, q4_0, q4_k, q6_k, every
// matrix), scored by the engine and by llama.cpp on the same file (make_reference.sh): the
// perplexity of a held-out passage within a stated relative bound, and the greedy continuation
// token for token where both engines quantize the activations alike.
//
// How each engine multiplies (so what may differ):
//   q4_k, q6_k: both quantize activations to int8 in blocks of 256 with an f32 scale (llama.cpp's
//     q8_K) and sum in integers: alike but for the order of the float sums. Greedy tokens must
//     be equal; perplexity within 1e-4 relative (measured: 4e-8 and 1e-8 on an AVX-512 Xeon).
//   q8_0, q4_0: both quantize activations to int8 blocks of 32, but llama.cpp rounds each
//     block's scale to fp16 (q8_0) where the engine keeps f32: a second rounding of ~2^-11 per
//     block on llama.cpp's side. Perplexity within 2e-3 relative (measured: 1.3e-4, 7e-5; the
//     quantization itself moves q4_0's perplexity by 7e-3); greedy tokens reported, not required.
//   f32: perplexity within 1e-5 (measured 2e-8), the same greedy tokens.
// These bounds hold with the integer kernels on every row count (forced here). By default the
// engine's AVX2 and portable builds dequantize the weights into the f32 GEMM from 32 rows on
// (prefill: kernels/qgemm.h), so those activations are not quantized at all and the perplexity
// of the 96-token passage moves further from llama.cpp's (measured: 4.4e-4 for q4_k, 1.6e-4 for
// q4_0): the default path is checked within 2e-3 for every type.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/qgemm.h"
#include "tfm/gguf_model.h"
#include "tfm/tfm.h"

using namespace tfm;

namespace {

std::string fixture(const std::string& name) {
  const char* dir = std::getenv("TFM_FIXTURE_DIR");
  return std::string(dir ? dir : "fixtures") + "/" + name;
}

std::vector<std::int64_t> heldout_ids() {
  std::ifstream in(fixture("heldout_ids.txt"));
  std::vector<std::int64_t> ids;
  std::string item;
  while (std::getline(in, item, ',')) ids.push_back(std::stoll(item));
  return ids;
}

// All positions' logits (T, V) of one sequence.
std::vector<float> logits(Model& m, const std::vector<std::int64_t>& ids, std::int64_t* vocab) {
  NoGradGuard ng;
  ModelInputs in;
  in.input_ids = Tensor::from_ints(ids, {1, static_cast<std::int64_t>(ids.size())});
  const Tensor out = m.forward(in).logits;
  *vocab = out.size(-1);
  return out.to_floats();
}

struct Case {
  const char* type;
  double ppl_rel_bound;
  bool greedy_must_match;
};

// Integer kernels at every row count (as llama.cpp), or the engine's default choice.
struct IntegerKernels {
  std::int64_t saved = kernels::qgemm_dequant_min_rows();
  explicit IntegerKernels(bool force) { kernels::set_qgemm_dequant_min_rows(force ? std::int64_t{1} << 40 : -1); }
  ~IntegerKernels() { kernels::set_qgemm_dequant_min_rows(saved); }
};

void check_path(const Case& c, bool integer_kernels) {
  const IntegerKernels scope(integer_kernels);
  std::ifstream in(fixture(std::string("llamacpp_q_") + c.type + ".json"));
  ASSERT_TRUE(in.good()) << "missing llama.cpp reference for " << c.type;
  const auto ref = nlohmann::json::parse(in);
  const std::vector<std::int64_t> ids = heldout_ids();
  ASSERT_GE(ids.size(), 64u) << "held-out passage too short";
  LoadedModel m = load_gguf_model(fixture(std::string("tfm_q_") + c.type + ".gguf"));

  std::int64_t V = 0;
  const std::vector<float> all = logits(m.model, ids, &V);
  double nll = 0;
  for (std::size_t t = 0; t + 1 < ids.size(); ++t) {
    const float* row = all.data() + t * static_cast<std::size_t>(V);
    double mx = row[0], sum = 0;
    for (std::int64_t v = 0; v < V; ++v) mx = std::max(mx, double(row[v]));
    for (std::int64_t v = 0; v < V; ++v) sum += std::exp(double(row[v]) - mx);
    nll += mx + std::log(sum) - row[ids[t + 1]];
  }
  const double ppl = std::exp(nll / static_cast<double>(ids.size() - 1));
  const double theirs = ref.at("perplexity").get<double>();
  const double rel = std::abs(ppl / theirs - 1);

  std::vector<std::int64_t> seq(ids.begin(), ids.begin() + 16), greedy;
  const auto want = ref.at("greedy").get<std::vector<std::int64_t>>();
  for (std::size_t k = 0; k < want.size(); ++k) {
    std::int64_t v = 0;
    const std::vector<float> l = logits(m.model, seq, &v);
    const float* last = l.data() + (seq.size() - 1) * static_cast<std::size_t>(v);
    const std::int64_t next = std::max_element(last, last + v) - last;
    greedy.push_back(next);
    seq.push_back(next);
  }
  std::size_t same = 0;
  while (same < want.size() && greedy[same] == want[same]) ++same;
  const double bound = integer_kernels ? c.ppl_rel_bound : std::max(c.ppl_rel_bound, 2e-3);
  const char* path = integer_kernels ? "integer kernels" : "default path";
  std::printf("%s (%s, %s): perplexity tfm %.5f, llama.cpp %.5f (relative difference %.2e, bound %.1e); greedy "
              "tokens equal for %zu of %zu\n",
              c.type, path, isa_name(active_isa()), ppl, theirs, rel, bound, same, want.size());
  EXPECT_LE(rel, bound) << c.type << " (" << path << "): perplexity " << ppl << " vs llama.cpp's " << theirs;
  if (c.greedy_must_match && integer_kernels) {
    EXPECT_EQ(greedy, want) << c.type << ": greedy continuation";
  }
}

void check(const Case& c) {
  check_path(c, true);
  check_path(c, false);
}

}  // namespace

TEST(LlamaCppQuantized, F32FileScoresAlike) { check({"f32", 1e-5, true}); }
TEST(LlamaCppQuantized, Q8_0FileScoresAlike) { check({"q8_0", 2e-3, false}); }
TEST(LlamaCppQuantized, Q4_0FileScoresAlike) { check({"q4_0", 2e-3, false}); }
TEST(LlamaCppQuantized, Q4_KFileScoresAndDecodesAlike) { check({"q4_k", 1e-4, true}); }
TEST(LlamaCppQuantized, Q6_KFileScoresAndDecodesAlike) { check({"q6_k", 1e-4, true}); }
