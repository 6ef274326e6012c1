// tfm::Tokenizer over the tokenizer.json pipeline and SentencePiece: loading from JSON
// (choosing the hand-written paths when the file's shape allows), full encodings, pairs.
#include <nlohmann/json.hpp>

#include "tfm/error.h"
#include "tfm/tokenizer_json.h"
#include "tokenize/pipeline.h"
#include "tokenize/pipeline_json.h"
#include "tokenize/spm_model.h"
#include "tokenize/tokenizer_impl.h"

namespace tfm {

namespace tok {
bool has_legacy_shape(const nlohmann::json& j);
Tokenizer::Impl impl_from_document(const nlohmann::json& j);

Tokenizer::Impl impl_from_any_json(const nlohmann::json& doc, const TokenizerConfig& config,
                                   std::string_view source_text) {
  std::shared_ptr<const Pipeline> pl = pipeline_from_document(doc);
  Tokenizer::Impl impl;
  if (has_legacy_shape(doc)) {
    impl = impl_from_document(doc);
  } else {
    impl.kind = TokenizerKind::pipeline;
    impl.tokens = pl->id_to_token;
    for (const auto& a : pl->added.tokens()) impl.added.push_back({a.content, a.id, a.special});
    impl.pipeline = pl;
    try {  // what to_json() returns: the file as given, else the document written out
      impl.source_json = std::make_shared<const std::string>(source_text.empty() ? doc.dump(2) + "\n"
                                                                                 : std::string(source_text));
    } catch (const nlohmann::json::exception& e) {
      fail("tokenizer.json", e.what());
    }
  }
  std::call_once(impl.lazy->once, [&] { impl.lazy->pipeline = pl; });
  impl.config = config;
  if (impl.kind == TokenizerKind::pipeline)
    impl.finalize("tokenizer.json");
  else
    impl.apply_config_and_pipeline();
  return impl;
}
}  // namespace tok

const tok::Pipeline& Tokenizer::Impl::full_pipeline() const {
  if (pipeline) return *pipeline;
  TFM_CHECK(!spm, "tokenizer", "full encodings (offsets, pairs) are not available for SentencePiece .model files");
  std::call_once(lazy->once, [&] { lazy->pipeline = tok::pipeline_from_json(tok::impl_to_json(*this)); });
  return *lazy->pipeline;
}

void Tokenizer::Impl::apply_config_and_pipeline() {
  if (spm) {
    pad = spm->pad();
    unk = spm->unk();
    bos = spm->bos();
    eos = spm->eos();
  }
  if (config.present) {
    auto id_of = [&](const std::string& t, std::int32_t& slot) {
      if (t.empty()) return;
      auto it = token_ids.find(t);
      if (it != token_ids.end()) slot = it->second;
    };
    id_of(config.bos_token, bos);
    id_of(config.eos_token, eos);
    id_of(config.pad_token, pad);
    id_of(config.unk_token, unk);
  }
  if (pipeline) {
    // What add_special puts around a sequence, read off the post-processor with a marker.
    prefix.clear();
    suffix.clear();
    if (pipeline->post_processor) {
      tok::Encoding marker;
      marker.ids = {-7};
      marker.type_ids = {0};
      marker.tokens = {""};
      marker.offsets = {{0, 0}};
      marker.special_mask = {0};
      marker.attention = {1};
      const tok::Encoding e = pipeline->post_processor->process(marker, nullptr, true);
      bool seen = false;
      for (std::int32_t id : e.ids) {
        if (id == -7)
          seen = true;
        else
          (seen ? suffix : prefix).push_back(id);
      }
    }
    template_from_file = true;
  } else if (spm) {
    prefix.clear();
    suffix.clear();
    if (config.add_bos_token.value_or(true) && bos >= 0) prefix.push_back(bos);
    if (config.add_eos_token.value_or(false) && eos >= 0) suffix.push_back(eos);
    template_from_file = true;
  }
}

void Tokenizer::Impl::encode_other(std::string_view text, bool add_special, std::vector<std::int32_t>& out) const {
  if (pipeline) {
    const tok::Encoding e = pipeline->encode(text, add_special, false);
    out.insert(out.end(), e.ids.begin(), e.ids.end());
    return;
  }
  if (add_special) out.insert(out.end(), prefix.begin(), prefix.end());
  spm->encode(text, out);
  if (add_special) out.insert(out.end(), suffix.begin(), suffix.end());
}

std::string Tokenizer::Impl::decode_other(std::span<const std::int32_t> ids, bool skip_special) const {
  std::vector<std::int32_t> v;
  v.reserve(ids.size());
  for (std::int32_t id : ids) {
    TFM_CHECK(id >= 0 && static_cast<std::size_t>(id) < tokens.size(), "tokenizer decode", "id ", id,
              " out of range [0, ", tokens.size(), ")");
    if (skip_special && special[static_cast<std::size_t>(id)]) continue;
    v.push_back(id);
  }
  if (pipeline) return pipeline->decode(v, false);
  return spm->decode(v);
}

static Encoding to_public(const tok::Encoding& e) {
  Encoding out;
  out.ids = e.ids;
  out.type_ids = e.type_ids;
  out.tokens = e.tokens;
  out.special_tokens_mask.assign(e.special_mask.begin(), e.special_mask.end());
  out.attention_mask.assign(e.attention.begin(), e.attention.end());
  for (const auto& r : e.offsets) out.offsets.emplace_back(r.begin, r.end);
  return out;
}

Encoding Tokenizer::encode_full(std::string_view text, bool add_special) const {
  return to_public(impl_->full_pipeline().encode(text, add_special, true));
}

Encoding Tokenizer::encode_pair(std::string_view a, std::string_view b, bool add_special) const {
  return to_public(impl_->full_pipeline().encode_pair(a, b, add_special));
}

const TokenizerConfig& Tokenizer::config() const { return impl_->config; }

Tokenizer Tokenizer::from_json(std::string_view json_text) { return from_json(json_text, TokenizerConfig{}); }

Tokenizer Tokenizer::from_json(std::string_view json_text, const TokenizerConfig& config) {
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(json_text);
  } catch (const nlohmann::json::exception& e) {
    fail("tokenizer.json", "not valid JSON: ", e.what());
  }
  return tok::tokenizer_from_json_text(doc, config, json_text);
}

Tokenizer tokenizer_from_json(const nlohmann::json& doc, const TokenizerConfig& config) {
  return tok::tokenizer_from_json_text(doc, config, {});
}

Tokenizer tok::tokenizer_from_json_text(const nlohmann::json& doc, const TokenizerConfig& config,
                                        std::string_view text) {
  try {
    return make_tokenizer(tok::impl_from_any_json(doc, config, text));
  } catch (const nlohmann::json::exception& e) {
    fail("tokenizer.json", "unexpected structure: ", e.what());
  }
}

}  // namespace tfm
