// Strided-window perplexity (include/tfm/perplexity.h gives the convention).
#include "tfm/perplexity.h"

#include <algorithm>
#include <cmath>

#include "tfm/error.h"

namespace tfm {

double PerplexityResult::perplexity() const { return std::exp(loss()); }

PerplexityResult strided_perplexity(Model& model, const std::vector<std::int32_t>& ids, std::int64_t context,
                                    std::int64_t stride, Model* base) {
  const ModelConfig& c = model.config();
  TFM_CHECK(c.architecture == Architecture::decoder_only && c.head == HeadKind::lm, "perplexity",
            "needs a decoder-only language model, this one is ", to_string(c.architecture), " with a ",
            to_string(c.head), " head");
  TFM_CHECK(context >= 2, "perplexity", "the context must be >= 2 tokens, got ", context);
  TFM_CHECK(stride >= 1 && stride <= context, "perplexity", "the stride must be in [1, context ", context, "], got ",
            stride);
  TFM_CHECK(c.position != PositionKind::learned || context <= c.max_positions, "perplexity", "context ", context,
            " exceeds the model's ", c.max_positions, " learned positions");
  const auto N = static_cast<std::int64_t>(ids.size());
  TFM_CHECK(N >= 2, "perplexity", "the text has ", N, " tokens; at least 2 are needed");
  const bool was_training = model.training();
  model.set_training(false);
  PerplexityResult r;
  const std::int64_t V = c.vocab_size;
  std::int64_t scored_to = 1;  // tokens [1, scored_to) are already predicted
  for (std::int64_t b = 0;; b += stride) {
    const std::int64_t e = std::min(b + context, N);
    std::vector<std::int64_t> w(ids.begin() + b, ids.begin() + e);
    ModelInputs in;
    in.input_ids = Tensor::from_ints(w, {1, e - b});
    const std::vector<float> logits = model.forward(in).logits.to_floats();  // (1, T, V)
    std::vector<float> base_logits;
    if (base != nullptr) {
      base_logits = base->forward(in).logits.to_floats();
      TFM_CHECK(base_logits.size() == logits.size(), "perplexity", "the base model's vocabulary differs");
    }
    for (std::int64_t t = std::max(scored_to, b + 1); t < e; ++t) {
      const float* row = logits.data() + (t - 1 - b) * V;  // position t-1 predicts x_t
      const double mx = *std::max_element(row, row + V);
      double z = 0;
      for (std::int64_t v = 0; v < V; ++v) z += std::exp(static_cast<double>(row[v]) - mx);
      const std::int32_t x = ids[static_cast<std::size_t>(t)];
      TFM_CHECK(x >= 0 && x < V, "perplexity", "token id ", x, " at ", t, " is outside the vocabulary of ", V);
      const double lse = mx + std::log(z);
      r.nll_sum += lse - static_cast<double>(row[x]);
      ++r.predicted;
      if (base != nullptr) {
        const float* brow = base_logits.data() + (t - 1 - b) * V;
        const double bmx = *std::max_element(brow, brow + V);
        double bz = 0;
        for (std::int64_t v = 0; v < V; ++v) bz += std::exp(static_cast<double>(brow[v]) - bmx);
        const double blse = bmx + std::log(bz);
        double kl = 0;
        for (std::int64_t v = 0; v < V; ++v) {
          const double lp = static_cast<double>(brow[v]) - blse;
          kl += std::exp(lp) * (lp - (static_cast<double>(row[v]) - lse));
        }
        r.kl_sum += kl;
        r.base_nll_sum += blse - static_cast<double>(brow[x]);
        r.same_top += (std::max_element(brow, brow + V) - brow) == (std::max_element(row, row + V) - row);
      }
    }
    scored_to = std::max(scored_to, e);
    ++r.windows;
    if (e == N) break;
  }
  model.set_training(was_training);
  return r;
}

}  // namespace tfm
