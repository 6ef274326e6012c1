// tfm eval --data FILE --stride S [--ctx N]: the whole file is one token stream (its text
// encoded at once, as the perplexity guide joins its documents), scored in strided windows.
#include "eval_strided.h"

#include <cmath>
#include <cstdio>
#include <optional>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "tfm/error.h"
#include "tfm/model_dir.h"
#include "tfm/perplexity.h"
#include "tfm/safetensors.h"

namespace tfm::cli {

void run_strided_eval(const std::string& dir, const std::string& data_file, std::int64_t context, std::int64_t stride,
                      bool json, const WeightOptions& weights, bool kl) {
  TFM_CHECK(!data_file.empty(), "eval", "--stride scores a text file: give --data FILE");
  TFM_CHECK(!kl || !weights.dtype.empty(), "eval", "--kl-divergence compares --dtype's weights with the f32 model: give --dtype");
  LoadedModel lm = load_model(dir, "", weights);
  std::optional<LoadedModel> base;
  if (kl) base.emplace(load_model_dir(dir));
  const std::int64_t ctx = context > 0 ? context : lm.config.max_positions;
  const std::vector<std::int32_t> ids = lm.tokenizer.encode(read_file(data_file));
  const PerplexityResult r = strided_perplexity(lm.model, ids, ctx, std::min(stride, ctx), base ? &base->model : nullptr);
  if (json) {
    nlohmann::json j{{"model", dir}, {"task", "lm"}, {"data", data_file}, {"examples", r.predicted},
                     {"context", ctx}, {"stride", std::min(stride, ctx)}, {"windows", r.windows},
                     {"loss", r.loss()}, {"perplexity", r.perplexity()}};
    if (!weights.dtype.empty()) j["dtype"] = weights.dtype + (weights.recipe.empty() ? "" : "/" + weights.recipe);
    if (kl) {
      const double n = static_cast<double>(std::max<std::int64_t>(r.predicted, 1));
      j["base_perplexity"] = std::exp(r.base_nll_sum / n);
      j["mean_kl"] = r.mean_kl();
      j["same_top_p"] = static_cast<double>(r.same_top) / n;
    }
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("model    %s (lm)\ndata     %s\ntokens   %lld predicted of %zu, %lld windows of %lld, stride %lld\n",
              dir.c_str(), data_file.c_str(), static_cast<long long>(r.predicted), ids.size(),
              static_cast<long long>(r.windows), static_cast<long long>(ctx), static_cast<long long>(std::min(stride, ctx)));
  std::printf("\n%-12s %10s\n%-12s %10.4f\n%-12s %10.4f\n", "metric", "value", "loss", r.loss(), "perplexity",
              r.perplexity());
  if (kl) {
    const double n = static_cast<double>(std::max<std::int64_t>(r.predicted, 1));
    std::printf("%-12s %10.4f\n%-12s %10.6f\n%-12s %10.4f\n", "f32 ppl", std::exp(r.base_nll_sum / n), "mean KL",
                r.mean_kl(), "same top", static_cast<double>(r.same_top) / n);
  }
}

}  // namespace tfm::cli
