// A SentencePiece .model run by Debian's libsentencepiece (T5, Marian, Llama-2's
// tokenizer.model): the library itself encodes and decodes, so the ids are SentencePiece's.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tfm::tok {

class SpmModel {
 public:
  // bytes: the serialized ModelProto; where names the file in errors.
  SpmModel(const std::string& bytes, const std::string& where);
  ~SpmModel();
  void encode(std::string_view text, std::vector<std::int32_t>& out) const;
  std::string decode(const std::vector<std::int32_t>& ids) const;
  std::int32_t size() const;
  std::string piece(std::int32_t id) const;
  bool is_control(std::int32_t id) const;  // <s>, </s>, <pad> ...
  std::int32_t bos() const, eos() const, pad() const, unk() const;

 private:
  struct State;
  std::unique_ptr<State> s_;
};

}  // namespace tfm::tok
