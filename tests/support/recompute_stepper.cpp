// Full-recompute DecodeStepper (see recompute_stepper.h).
#include "support/recompute_stepper.h"

#include "tfm/autograd.h"
#include "tfm/error.h"

namespace tfm::test {
namespace {
Tensor ids_tensor(const std::vector<std::int32_t>& t) {
  return Tensor::from_ints(std::vector<std::int64_t>(t.begin(), t.end()), {1, static_cast<std::int64_t>(t.size())});
}
bool seq2seq(const Model& m) { return m.config().architecture == Architecture::encoder_decoder; }
}  // namespace

std::vector<float> last_logits(Model& model, const std::vector<std::int32_t>& source,
                               const std::vector<std::int32_t>& tokens) {
  TFM_CHECK(!tokens.empty(), "recompute_stepper", "a row has no tokens");
  NoGradGuard no_grad;
  model.set_training(false);
  ModelInputs in;
  if (seq2seq(model)) {
    in.input_ids = ids_tensor(source);
    in.decoder_input_ids = ids_tensor(tokens);
  } else {
    in.input_ids = ids_tensor(tokens);
  }
  const std::vector<float> all = model.forward(in).logits.to_floats();  // (1, T, V)
  const std::int64_t V = model.config().vocab_size;
  return std::vector<float>(all.end() - V, all.end());
}

RecomputeStepper::RecomputeStepper(Model& model, std::vector<std::int32_t> prompt) : model_(model) {
  if (seq2seq(model)) {
    source_ = std::move(prompt);
    rows_.push_back({static_cast<std::int32_t>(model.config().decoder_start_token_id)});
  } else {
    rows_.push_back(std::move(prompt));
  }
}

std::int64_t RecomputeStepper::vocab_size() const { return model_.config().vocab_size; }

std::vector<float> RecomputeStepper::first_logits() {
  TFM_CHECK(rows_.size() == 1, "recompute_stepper", "first_logits wants the single initial row, have ", rows_.size());
  return last_logits(model_, source_, rows_[0]);
}

Tensor RecomputeStepper::step(const std::vector<std::int64_t>& parents, const std::vector<std::int32_t>& tokens) {
  TFM_CHECK(parents.size() == tokens.size(), "recompute_stepper", parents.size(), " parents for ", tokens.size(),
            " tokens");
  ++calls_;
  const auto V = vocab_size();
  std::vector<std::vector<std::int32_t>> next;
  for (std::size_t r = 0; r < parents.size(); ++r) {
    TFM_CHECK(parents[r] >= 0 && parents[r] < static_cast<std::int64_t>(rows_.size()), "recompute_stepper",
              "parent ", parents[r], " of row ", r, " is not one of the ", rows_.size(), " rows");
    TFM_CHECK(tokens[r] >= 0 && tokens[r] < V, "recompute_stepper", "token ", tokens[r], " outside vocab ", V);
    next.push_back(rows_[static_cast<std::size_t>(parents[r])]);
    next.back().push_back(tokens[r]);
  }
  rows_ = std::move(next);
  std::vector<float> out;  // (rows, V)
  for (const auto& row : rows_) {
    const std::vector<float> l = last_logits(model_, source_, row);
    out.insert(out.end(), l.begin(), l.end());
  }
  return Tensor::from_floats(out, {static_cast<std::int64_t>(rows_.size()), V});
}

}  // namespace tfm::test
