#include "tokenize/spm_model.h"

#include <sentencepiece_processor.h>

#include <exception>

#include "tfm/error.h"

namespace tfm::tok {

struct SpmModel::State {
  sentencepiece::SentencePieceProcessor sp;
};

SpmModel::SpmModel(const std::string& bytes, const std::string& where) : s_(std::make_unique<State>()) {
  // libsentencepiece reports most defects as a status, but some throw (its trie builder on a
  // zero-length piece, found by fuzz/sentencepiece_model.cpp): both become one tfm::Error.
  try {
    const auto st = s_->sp.LoadFromSerializedProto(bytes);
    TFM_CHECK(st.ok(), where, "not a valid SentencePiece model: ", st.ToString());
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail(where, "not a valid SentencePiece model: ", e.what());
  }
}
SpmModel::~SpmModel() = default;

void SpmModel::encode(std::string_view text, std::vector<std::int32_t>& out) const {
  std::vector<int> ids;
  try {
    const auto st = s_->sp.Encode(absl::string_view(text.data(), text.size()), &ids);
    TFM_CHECK(st.ok(), "sentencepiece", "encode failed: ", st.ToString());
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail("sentencepiece", "encode failed: ", e.what());
  }
  out.insert(out.end(), ids.begin(), ids.end());
}

std::string SpmModel::decode(const std::vector<std::int32_t>& ids) const {
  std::string out;
  try {
    const auto st = s_->sp.Decode(std::vector<int>(ids.begin(), ids.end()), &out);
    TFM_CHECK(st.ok(), "sentencepiece", "decode failed: ", st.ToString());
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail("sentencepiece", "decode failed: ", e.what());
  }
  return out;
}

std::int32_t SpmModel::size() const { return s_->sp.GetPieceSize(); }
std::string SpmModel::piece(std::int32_t id) const { return s_->sp.IdToPiece(id); }
bool SpmModel::is_control(std::int32_t id) const { return s_->sp.IsControl(id); }
std::int32_t SpmModel::bos() const { return s_->sp.bos_id(); }
std::int32_t SpmModel::eos() const { return s_->sp.eos_id(); }
std::int32_t SpmModel::pad() const { return s_->sp.pad_id(); }
std::int32_t SpmModel::unk() const { return s_->sp.unk_id(); }

}  // namespace tfm::tok
