// A DecodeStepper without a KV cache: every step re-runs the model over each row's whole
// token list. Slow and obviously correct — the reference the samplers, beam search and the
// KV-cache session are tested against.
#pragma once

#include <cstdint>
#include <vector>

#include "tfm/generate.h"
#include "tfm/model.h"

namespace tfm::test {

// Next-token logits (V) after `tokens`, by one full forward (eval mode, no grad).
// Decoder-only: input_ids = tokens. Encoder-decoder: input_ids = source, decoder_input_ids
// = tokens (which start with the decoder start token).
std::vector<float> last_logits(Model& model, const std::vector<std::int32_t>& source,
                               const std::vector<std::int32_t>& tokens);

class RecomputeStepper : public DecodeStepper {
 public:
  // Decoder-only: one row holding `prompt`. Encoder-decoder: `prompt` is the source and the
  // one row holds the decoder start token (config().decoder_start_token_id).
  RecomputeStepper(Model& model, std::vector<std::int32_t> prompt);
  std::int64_t vocab_size() const override;
  Tensor step(const std::vector<std::int64_t>& parents, const std::vector<std::int32_t>& tokens) override;
  // The initial row's next-token logits (V): what beam_search takes as first_logits.
  std::vector<float> first_logits();
  // Row r's tokens (decoder-only: prompt included; encoder-decoder: start token included).
  const std::vector<std::vector<std::int32_t>>& rows() const { return rows_; }
  std::int64_t calls() const { return calls_; }

 private:
  Model& model_;
  std::vector<std::int32_t> source_;           // encoder-decoder only
  std::vector<std::vector<std::int32_t>> rows_;
  std::int64_t calls_ = 0;
};

}  // namespace tfm::test
