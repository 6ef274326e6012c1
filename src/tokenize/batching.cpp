// Batching: specials around each sequence, truncation, padding to the longest sequence or
// to max_length, and the valid lengths (the d2l seeds' valid_lens).
#include "tfm/error.h"
#include "tokenize/tokenizer_impl.h"

namespace tfm {

TokenBatch Tokenizer::encode_padded(const std::vector<std::string>& texts, const BatchOptions& opts) const {
  const char* where = "tokenizer batch";
  TFM_CHECK(opts.max_length >= 0, where, "max_length ", opts.max_length, " must be >= 0");
  TFM_CHECK(opts.padding != BatchOptions::Padding::max_length || opts.max_length > 0, where,
            "padding to max_length needs max_length > 0");
  const std::int32_t pad = opts.pad_id >= 0 ? opts.pad_id : impl_->pad;
  TFM_CHECK(pad >= 0, where, "this tokenizer has no <pad> token: pass BatchOptions::pad_id");
  TFM_CHECK(pad < vocab_size(), where, "pad id ", pad, " out of range [0, ", vocab_size(), ")");
  const std::size_t n_prefix = opts.add_special ? impl_->prefix.size() : 0;
  const std::size_t n_suffix = opts.add_special ? impl_->suffix.size() : 0;
  if (opts.max_length > 0)
    TFM_CHECK(static_cast<std::size_t>(opts.max_length) >= n_prefix + n_suffix, where, "max_length ", opts.max_length,
              " leaves no room for the ", n_prefix + n_suffix, " special tokens");

  std::vector<std::vector<std::int32_t>> seqs = encode_batch(texts, false);
  TokenBatch out;
  out.batch = static_cast<std::int64_t>(texts.size());
  out.valid_lens.resize(texts.size());
  std::int64_t longest = 0;
  for (std::size_t b = 0; b < seqs.size(); ++b) {
    auto& s = seqs[b];
    if (opts.max_length > 0) {
      const std::size_t room = static_cast<std::size_t>(opts.max_length) - n_prefix - n_suffix;
      if (s.size() > room) s.resize(room);  // truncate the text, keep the specials
    }
    if (opts.add_special) {
      s.insert(s.begin(), impl_->prefix.begin(), impl_->prefix.end());
      s.insert(s.end(), impl_->suffix.begin(), impl_->suffix.end());
    }
    out.valid_lens[b] = static_cast<std::int32_t>(s.size());
    longest = std::max<std::int64_t>(longest, static_cast<std::int64_t>(s.size()));
  }
  out.length = opts.padding == BatchOptions::Padding::max_length ? opts.max_length : longest;
  out.ids.assign(static_cast<std::size_t>(out.batch * out.length), pad);
  for (std::size_t b = 0; b < seqs.size(); ++b)
    std::copy(seqs[b].begin(), seqs[b].end(), out.ids.begin() + static_cast<std::ptrdiff_t>(b * out.length));
  return out;
}

}  // namespace tfm
