// tfm bench grammar — what constrained decoding costs on GPT-2's 50,257-token vocabulary.
//
//   tfm bench grammar [--tokenizer DIR]     (default data/gpt2-tokenizer, from the repository root)
//
// 1. Setup: the vocabulary as bytes and its trie (once per model), and compiling a schema.
// 2. Masks: the first mask of a state walks the whole trie (cold); later visits of the state
//    reuse it (cached). Both timed on the states a JSON string's content and an object's
//    start put the matcher in.
// 3. Per token, in a real decoding loop: a GPT-2-small-sized decoder (random weights, f32)
//    generates `steps` tokens with the default sampling with the schema and without it, the
//    same seeds. The decode times per token are printed, and the masks alone: the constrained
//    tokens replayed through a fresh matcher, allowed() timed at each (cold walks included),
//    over the plain time per token. The target of the issue: <= 10%.
#include <chrono>
#include <cstdio>

#include "bench_util.h"
#include "cli_common.h"
#include "tfm/error.h"
#include "tfm/grammar.h"
#include "tfm/model.h"
#include "tfm/runtime.h"
#include "tfm/session.h"
#include "tfm/tokenizer.h"

namespace tfm::cli {
namespace {


const char* kSchema = R"({"type": "object", "properties": {
  "name": {"type": "string", "maxLength": 40}, "age": {"type": "integer"},
  "email": {"type": "string", "format": "email"},
  "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 4},
  "address": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
              "required": ["city", "zip"]},
  "notes": {"type": "string"}},
  "required": ["name", "age", "address", "notes"], "additionalProperties": false})";

}  // namespace

void run_bench_grammar(const std::string& tokenizer_dir, int threads) {
  std::printf("\n== constrained decoding on GPT-2's vocabulary (%s), %d threads ==\n", tokenizer_dir.c_str(), threads);
  const Tokenizer tok = load_tokenizer(tokenizer_dir);
  auto t0 = std::chrono::steady_clock::now();
  const auto bytes = token_bytes(tok);
  const auto vocab = std::make_shared<const TokenTrie>(bytes);
  std::printf("vocabulary: %lld tokens, bytes + trie (%zu nodes) in %.1f ms (once per model)\n",
              static_cast<long long>(vocab->vocab_size()), vocab->nodes().size(), 1e3 * seconds_since(t0));
  t0 = std::chrono::steady_clock::now();
  const auto grammar = std::make_shared<const Grammar>(Grammar::from_json_schema(kSchema));
  std::printf("schema -> grammar: %.2f ms (%zu GBNF bytes)\n", 1e3 * seconds_since(t0), grammar->gbnf().size());

  // Masks at two states: the object's start, and inside the "name" string.
  for (const auto& [label, prefix] : {std::pair<const char*, const char*>{"object start", ""}, {"inside a string", "{\"name\":\"Ann"}}) {
    GrammarMatcher m(*grammar, vocab);
    if (!m.accept_bytes(prefix)) fail("bench grammar", "prefix not accepted");
    t0 = std::chrono::steady_clock::now();
    const std::int64_t n = m.allowed().count();
    const double cold = seconds_since(t0);
    const int reps = 200;
    t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) (void)m.allowed();
    const double warm = seconds_since(t0) / reps;
    std::printf("mask at %-16s: %6lld tokens allowed, cold %7.3f ms, cached %7.4f ms\n", label, static_cast<long long>(n),
                1e3 * cold, 1e3 * warm);
  }

  Model model = Model::create(model_preset("gpt2"), 1234);
  SessionOptions so;
  so.ctx_size = 512;
  Generator gen(model, tok, so);
  const std::int64_t steps = 128;
  std::printf("GPT-2-size decoder (random weights, f32), %lld tokens, default sampling (temperature 0.8, top-k 40), 3 seeds:\n",
              static_cast<long long>(steps));
  double plain_s = 0, plain_n = 0, con_s = 0, con_n = 0, mask_s = 0, mask_n = 0;
  for (const bool constrained : {false, true, false, true}) {  // interleaved: drift hits both
    for (std::uint64_t seed = 1; seed <= 3; ++seed) {
      GenerateOptions o;
      o.max_new_tokens = steps;
      o.sampling.seed = seed;
      o.stop_at_eos = false;
      if (constrained) o.grammar = grammar;
      Generator g(model, tok, so);
      const GenerateResult r = g.generate("{", o);
      const Timings& t = g.timings();
      (constrained ? con_s : plain_s) += t.decode_seconds;
      (constrained ? con_n : plain_n) += static_cast<double>(t.decode_tokens);
      if (!constrained) continue;
      // The masks alone: the same tokens replayed through a fresh matcher (cold walks included).
      GrammarMatcher m(*grammar, vocab);
      for (std::size_t i = 0; i < r.tokens.size(); ++i) {
        const auto t1 = std::chrono::steady_clock::now();
        (void)m.allowed(static_cast<std::int64_t>(steps) - static_cast<std::int64_t>(i));
        mask_s += seconds_since(t1);
        mask_n += 1;
        m.accept(r.tokens[i]);
      }
    }
  }
  const double plain = plain_s / plain_n, con = con_s / con_n, mask = mask_s / mask_n;
  std::printf("  plain       %7.2f ms/token\n  constrained %7.2f ms/token (%+.1f%%: the sampler also sorts fewer candidates)\n"
              "  the masks alone: %.3f ms/token = %.1f%% of a plain token (target <= 10%%)\n",
              1e3 * plain, 1e3 * con, 100 * (con - plain) / plain, 1e3 * mask, 100 * mask / plain);
}

}  // namespace tfm::cli
