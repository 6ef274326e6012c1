// Perplexity of a language model on a token stream with strided windows — the convention of
// Hugging Face's perplexity guide ("Perplexity of fixed-length models"):
//
//   windows of `context` tokens start at 0, stride, 2*stride, ... and the last one ends at
//   the stream's end; each window predicts only the tokens no earlier window predicted (and
//   never its own first token, which has no context), each from the window's tokens before it.
//
// So every token but x_0 is predicted exactly once when stride < context, with at least
// context - stride tokens of context (the guide's sliding window); stride == context gives
// disjoint windows whose first tokens go unpredicted. perplexity = exp(nll_sum / predicted).
#pragma once

#include <cstdint>
#include <vector>

#include "tfm/model.h"

namespace tfm {

struct PerplexityResult {
  double nll_sum = 0;           // sum of -log p(x_t | window context), natural log
  std::int64_t predicted = 0;   // tokens predicted
  std::int64_t windows = 0;
  // With a base model (llama-perplexity --kl-divergence's figures): sum over predicted tokens
  // of KL(p_base || p_model) in nats, the base model's NLL, and how often the two agree on
  // the most likely token.
  double kl_sum = 0, base_nll_sum = 0;
  std::int64_t same_top = 0;
  double mean_kl() const { return predicted > 0 ? kl_sum / static_cast<double>(predicted) : 0.0; }
  double loss() const { return predicted > 0 ? nll_sum / static_cast<double>(predicted) : 0.0; }
  double perplexity() const;
};

// ids: the whole stream (>= 2 tokens); 1 <= stride <= context. Decoder-only LM heads only.
// base: the reference model (same vocabulary) for the KL figures, or null.
PerplexityResult strided_perplexity(Model& model, const std::vector<std::int32_t>& ids, std::int64_t context,
                                    std::int64_t stride, Model* base = nullptr);

}  // namespace tfm
