// Fuzz target: encode on arbitrary bytes, for each kind of tokenizer the engine builds (GPT-2's
// byte-level BPE from data/gpt2-tokenizer, a trained BPE with the CJK rule, a trained
// character and a trained word vocabulary); the first input byte picks one. Properties:
// byte-level BPE decodes every encoding back to the exact input bytes (include/tfm/tokenizer.h
// promises it for invalid UTF-8 and NUL too); char/word encodings stay inside the
// vocabulary; padded batches match encode; check_utf8 agrees with a reference validator
// written from the Unicode standard's table of well-formed byte sequences (Table 3-7).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_check.h"
#include "tfm/error.h"
#include "tfm/tokenizer.h"

namespace {

// Unicode 15, section 3.9, Table 3-7: the well-formed UTF-8 byte sequences.
bool reference_utf8_valid(std::string_view s) {
  std::size_t i = 0;
  const auto at = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const auto in = [](unsigned v, unsigned lo, unsigned hi) { return v >= lo && v <= hi; };
  while (i < s.size()) {
    const unsigned b = at(i);
    std::size_t n = 0;
    unsigned lo = 0x80, hi = 0xBF;  // range of the second byte
    if (b <= 0x7F) n = 1;
    else if (in(b, 0xC2, 0xDF)) n = 2;
    else if (b == 0xE0) n = 3, lo = 0xA0;
    else if (in(b, 0xE1, 0xEC) || in(b, 0xEE, 0xEF)) n = 3;
    else if (b == 0xED) n = 3, hi = 0x9F;
    else if (b == 0xF0) n = 4, lo = 0x90;
    else if (in(b, 0xF1, 0xF3)) n = 4;
    else if (b == 0xF4) n = 4, hi = 0x8F;
    else return false;
    if (i + n > s.size()) return false;
    if (n >= 2 && !in(at(i + 1), lo, hi)) return false;
    for (std::size_t k = 2; k < n; ++k)
      if (!in(at(i + k), 0x80, 0xBF)) return false;
    i += n;
  }
  return true;
}

struct Tokenizers {
  std::vector<tfm::Tokenizer> all;  // GPT-2, BPE+CJK, char, word
};

const Tokenizers& tokenizers() {
  static const Tokenizers t = [] {
    Tokenizers r;
    r.all.push_back(tfm::Tokenizer::load(TFM_SOURCE_DIR "/data/gpt2-tokenizer"));
    std::vector<std::string> corpus;
    for (int i = 0; i < 20; ++i) {
      corpus.push_back("Tom is my friend. 汤姆是我的朋友。");
      corpus.push_back("I love you, don't you? 我爱你。 42 times\tover\n");
      corpus.push_back("Où est la gare? 車站在哪裡？ ひらがな 한국어 😀");
    }
    tfm::TokenizerTrainOptions o;
    o.vocab_size = 400;
    o.isolate_cjk = true;
    o.extra_specials = {"<cls>", "<sep>"};
    r.all.push_back(tfm::Tokenizer::train(corpus, o));
    o = {};
    o.kind = tfm::TokenizerKind::char_level;
    r.all.push_back(tfm::Tokenizer::train(corpus, o));
    o.kind = tfm::TokenizerKind::word_level;
    o.min_freq = 2;
    r.all.push_back(tfm::Tokenizer::train(corpus, o));
    return r;
  }();
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)tokenizers();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const auto& all = tokenizers().all;
  const tfm::Tokenizer& tok = all[data[0] % all.size()];
  const bool special = (data[0] / all.size()) % 2 == 1;
  const std::string text(reinterpret_cast<const char*>(data) + 1, size - 1);

  bool utf8_ok = true;
  try {
    tfm::check_utf8(text, "fuzz");
  } catch (const tfm::Error&) {
    utf8_ok = false;
  }
  tfm::fuzz::require(utf8_ok == reference_utf8_valid(text), "check_utf8 agrees with Table 3-7");

  std::vector<std::int32_t> ids;
  try {
    ids = tok.encode(text, special);
  } catch (const tfm::Error&) {
    tfm::fuzz::require(tok.kind() != tfm::TokenizerKind::bpe, "byte-level BPE encodes any bytes");
    return 0;
  }
  for (const auto id : ids) tfm::fuzz::require(id >= 0 && id < tok.vocab_size(), "ids are inside the vocabulary");
  const std::string decoded = tok.decode(ids);
  if (tok.kind() == tfm::TokenizerKind::bpe && !special)
    tfm::fuzz::require(decoded == text, "byte-level BPE decodes back to the input bytes");
  if (tok.pad_id() >= 0) {
    tfm::BatchOptions bo;
    bo.add_special = special;
    const tfm::TokenBatch b = tok.encode_padded({text, "x"}, bo);
    tfm::fuzz::require(b.batch == 2 && b.valid_lens[0] == static_cast<std::int32_t>(ids.size()) &&
                           std::vector<std::int32_t>(b.ids.begin(), b.ids.begin() + b.valid_lens[0]) == ids,
                       "a padded batch holds the encode() ids");
  }
  return 0;
}
