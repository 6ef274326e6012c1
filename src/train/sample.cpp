// Temperature sampling from a decoder-only LM by full recompute (no KV cache): each new token
// runs the model over the last max_positions tokens.
#include <algorithm>
#include <cmath>

#include "kernels/random.h"
#include "tfm/autograd.h"
#include "tfm/error.h"
#include "tfm/train.h"

namespace tfm {

std::vector<std::int32_t> sample_tokens(Model& model, std::vector<std::int32_t> prompt, std::int64_t n,
                                        double temperature, std::uint64_t seed) {
  const ModelConfig& c = model.config();
  TFM_CHECK(c.architecture == Architecture::decoder_only && c.head == HeadKind::lm, "sample",
            "needs a decoder-only LM, got architecture ", to_string(c.architecture));
  TFM_CHECK(!prompt.empty(), "sample", "the prompt encodes to no tokens");
  NoGradGuard no_grad;
  const bool was_training = model.training();
  model.set_training(false);
  const auto V = c.vocab_size;
  std::vector<double> probs(static_cast<std::size_t>(V));
  for (std::int64_t i = 0; i < n; ++i) {
    const auto len = std::min<std::int64_t>(static_cast<std::int64_t>(prompt.size()), c.max_positions);
    std::vector<std::int64_t> ctx(prompt.end() - len, prompt.end());
    ModelInputs in;
    in.input_ids = Tensor::from_ints(ctx, {1, len});
    const Tensor logits = model.forward(in).logits;  // (1, len, V)
    const std::vector<float> all = logits.to_floats();
    const float* last = all.data() + (len - 1) * V;
    std::int32_t next = 0;
    if (temperature <= 0) {
      next = static_cast<std::int32_t>(std::max_element(last, last + V) - last);
    } else {
      const double mx = *std::max_element(last, last + V);
      double total = 0;
      for (std::int64_t v = 0; v < V; ++v) total += probs[v] = std::exp((last[v] - mx) / temperature);
      const double u = kernels::uniform_from_bits(kernels::philox4x32(seed, 0, static_cast<std::uint64_t>(i))[0]) * total;
      double acc = 0;
      next = static_cast<std::int32_t>(V - 1);
      for (std::int64_t v = 0; v < V; ++v)
        if ((acc += probs[v]) > u) {
          next = static_cast<std::int32_t>(v);
          break;
        }
    }
    prompt.push_back(next);
  }
  model.set_training(was_training);
  return prompt;
}

}  // namespace tfm
