// Fuzz target: the tokenizer.json loader (every model and pre-tokenizer type it reads), then
// encode/decode with what it built. Bad input must be a tfm::Error; a tokenizer it accepts
// must encode the input's own bytes and a fixed sample without crashing (a tfm::Error is
// allowed: a BPE vocabulary may lack a byte), give ids inside its vocabulary, and save to a
// tokenizer.json that loads back to the same file and the same encodings.
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_check.h"
#include "tfm/error.h"
#include "tfm/tokenizer.h"

namespace {

// Encodes text (a tfm::Error is an accepted answer, returned as no ids plus failed = true).
std::vector<std::int32_t> encode_or_error(const tfm::Tokenizer& t, const std::string& text, bool special,
                                          bool& failed) {
  failed = false;
  try {
    return t.encode(text, special);
  } catch (const tfm::Error&) {
    failed = true;
    return {};
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  tfm::Tokenizer tok;
  try {
    tok = tfm::Tokenizer::from_json(text);
  } catch (const tfm::Error&) {
    return 0;
  }
  const std::vector<std::string> samples = {text.substr(0, 256), "Hello world, it's 42!", "汤姆是我的朋友。 ok",
                                            std::string("a\xff\0b", 4), ""};
  std::string saved;
  try {
    saved = tok.to_json();
  } catch (const tfm::Error&) {
    saved.clear();  // a vocabulary that JSON cannot hold (invalid UTF-8 in a token) is refused on save
  }
  const bool reload = !saved.empty();
  tfm::Tokenizer back = reload ? tfm::Tokenizer::from_json(saved) : tok;  // what it saved must load
  if (reload) tfm::fuzz::require(back.to_json() == saved, "a saved tokenizer.json reloads to the same file");
  for (const auto& s : samples) {
    for (const bool special : {false, true}) {
      bool failed = false, failed_back = false;
      const auto ids = encode_or_error(tok, s, special, failed);
      const auto ids_back = encode_or_error(back, s, special, failed_back);
      tfm::fuzz::require(failed == failed_back && ids == ids_back, "the reloaded tokenizer encodes alike");
      for (const auto id : ids) tfm::fuzz::require(id >= 0 && id < tok.vocab_size(), "ids are inside the vocabulary");
      (void)tok.decode(ids, special);
      try {
        (void)tok.tokenize(s);
      } catch (const tfm::Error&) {
      }
    }
  }
  return 0;
}
