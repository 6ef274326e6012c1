// tfm eval --data FILE --stride S [--ctx N]: the whole file is one token stream (its text
// encoded at once, as the perplexity guide joins its documents), scored in strided windows.
#include "eval_strided.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "tfm/error.h"
#include "tfm/model_dir.h"
#include "tfm/perplexity.h"
#include "tfm/safetensors.h"

namespace tfm::cli {

void run_strided_eval(const std::string& dir, const std::string& data_file, std::int64_t context, std::int64_t stride,
                      bool json) {
  TFM_CHECK(!data_file.empty(), "eval", "--stride scores a text file: give --data FILE");
  LoadedModel lm = load_model_dir(dir);
  const std::int64_t ctx = context > 0 ? context : lm.config.max_positions;
  const std::vector<std::int32_t> ids = lm.tokenizer.encode(read_file(data_file));
  const PerplexityResult r = strided_perplexity(lm.model, ids, ctx, std::min(stride, ctx));
  if (json) {
    nlohmann::json j{{"model", dir}, {"task", "lm"}, {"data", data_file}, {"examples", r.predicted},
                     {"context", ctx}, {"stride", std::min(stride, ctx)}, {"windows", r.windows},
                     {"loss", r.loss()}, {"perplexity", r.perplexity()}};
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf("model    %s (lm)\ndata     %s\ntokens   %lld predicted of %zu, %lld windows of %lld, stride %lld\n",
              dir.c_str(), data_file.c_str(), static_cast<long long>(r.predicted), ids.size(),
              static_cast<long long>(r.windows), static_cast<long long>(ctx), static_cast<long long>(std::min(stride, ctx)));
  std::printf("\n%-12s %10s\n%-12s %10.4f\n%-12s %10.4f\n", "metric", "value", "loss", r.loss(), "perplexity",
              r.perplexity());
}

}  // namespace tfm::cli
