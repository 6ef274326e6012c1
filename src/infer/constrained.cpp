// Constrained decoding's glue between a grammar and a decoding loop: the vocabulary as bytes,
// and the per-sequence mask with the end tokens (docs/structured_output.md).
#include "infer/decode_steps.h"
#include "tfm/error.h"
#include "tfm/session.h"

namespace tfm {

std::vector<std::string> token_bytes(const Tokenizer& tok) {
  const std::int64_t V = tok.vocab_size();
  std::vector<std::string> out(static_cast<std::size_t>(V));
  // A plain token to decode after: decoders that treat the text's first token apart
  // (SentencePiece drops its leading space) then give the token as it reads mid-text.
  std::int32_t ref = tok.token_to_id("a");
  for (std::int32_t t = 0; ref < 0 && t < V; ++t)
    if (!tok.is_special(t) && !tok.decode(std::vector<std::int32_t>{t}).empty()) ref = t;
  const std::string ref_text = ref >= 0 ? tok.decode(std::vector<std::int32_t>{ref}) : std::string();
  for (std::int32_t t = 0; t < V; ++t) {
    if (tok.is_special(t)) continue;
    const std::string piece = tok.id_to_token(t);
    if (piece.size() == 6 && piece.rfind("<0x", 0) == 0 && piece[5] == '>') {  // byte fallback
      out[static_cast<std::size_t>(t)] = std::string(1, static_cast<char>(std::stoi(piece.substr(3, 2), nullptr, 16)));
      continue;
    }
    std::string alone = tok.decode(std::vector<std::int32_t>{t});
    if (ref >= 0) {
      const std::string both = tok.decode(std::vector<std::int32_t>{ref, t});
      if (both.size() >= ref_text.size() && both.compare(0, ref_text.size(), ref_text) == 0) alone = both.substr(ref_text.size());
    }
    out[static_cast<std::size_t>(t)] = std::move(alone);
  }
  return out;
}

namespace detail {

Constraint::Constraint(const Grammar& g, std::shared_ptr<const TokenTrie> vocab, std::int32_t tokenizer_eos, const GenerateOptions& o)
    : m_(g, vocab), vocab_(std::move(vocab)), trigger_(o.grammar_trigger), active_(o.grammar_trigger.empty()) {
  if (o.stop_at_eos) {
    if (tokenizer_eos >= 0) ends_.push_back(tokenizer_eos);
    ends_.insert(ends_.end(), o.eos_ids.begin(), o.eos_ids.end());
  }
}

const TokenMask* Constraint::allowed(std::int64_t tokens_left, bool* stop) {
  *stop = false;
  if (!active_) return nullptr;
  *stop = true;
  if (dead_ || !m_.can_continue()) return nullptr;  // complete with nothing to add, or dead
  mask_ = m_.allowed(tokens_left);
  if (m_.accepting())
    for (const std::int32_t e : ends_)
      if (e >= 0 && static_cast<std::size_t>(e >> 6) < mask_.words.size()) mask_.words[static_cast<std::size_t>(e) >> 6] |= std::uint64_t{1} << (e & 63);
  if (!mask_.any()) return nullptr;
  *stop = false;
  return &mask_;
}

void Constraint::accept(std::int32_t tok) {
  if (active_) {
    m_.accept(tok);
    return;
  }
  text_ += vocab_->bytes(tok);
  const auto at = text_.find(trigger_);
  if (at == std::string::npos) return;
  // The grammar's sentence starts at the trigger; what follows it in this token must fit.
  active_ = true;
  dead_ = !m_.accept_bytes(std::string_view(text_).substr(at));
  text_.clear();
}

std::shared_ptr<const TokenTrie> grammar_vocabulary(const Tokenizer& tok, std::int64_t V, std::shared_ptr<const TokenTrie>& cache) {
  if (!cache) {
    std::vector<std::string> bytes = token_bytes(tok);
    bytes.resize(static_cast<std::size_t>(std::max<std::int64_t>(V, static_cast<std::int64_t>(bytes.size()))));
    bytes.resize(static_cast<std::size_t>(V));  // ids past the model's logits cannot be sampled
    cache = std::make_shared<const TokenTrie>(bytes);
  }
  return cache;
}

}  // namespace detail
}  // namespace tfm
