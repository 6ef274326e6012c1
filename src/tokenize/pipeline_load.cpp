// tokenizer.json -> Pipeline. Every component type the file names is built here; an unknown
// one is an error that names it and lists the supported ones.
#include <nlohmann/json.hpp>

#include "tfm/error.h"
#include "tokenize/components.h"
#include "tokenize/pipeline_json.h"

namespace tfm::tok {

using nlohmann::json;

namespace {

constexpr const char* kWhere = "tokenizer.json";

std::string type_of(const json& j, const char* what) {
  TFM_CHECK(j.is_object(), kWhere, what, " is not an object: ", j.dump().substr(0, 200));
  TFM_CHECK(j.contains("type") && j.at("type").is_string(), kWhere, what, " has no \"type\": ", j.dump().substr(0, 200));
  return j.at("type").get<std::string>();
}

[[noreturn]] void unknown(const char* what, const std::string& type, const char* supported) {
  fail(kWhere, "unknown ", what, " type '", type, "' (supported: ", supported, ")");
}

std::string str(const json& j, const char* key, const std::string& dflt = "") {
  if (!j.contains(key) || j.at(key).is_null()) return dflt;
  return j.at(key).get<std::string>();
}
bool flag(const json& j, const char* key, bool dflt) {
  if (!j.contains(key) || j.at(key).is_null()) return dflt;
  return j.at(key).get<bool>();
}

std::uint32_t one_char(const std::string& s, const char* what) {
  std::uint32_t cp = 0;
  TFM_CHECK(!s.empty() && static_cast<std::size_t>(next_cp(s, 0, cp)) == s.size(), kWhere, what, " '", s,
            "' is not one character");
  return cp;
}

// {"String": "..."} or {"Regex": "..."} -> (literal, regex)
std::pair<std::string, std::string> pattern(const json& j) {
  TFM_CHECK(j.is_object(), kWhere, "pattern ", j.dump(), " is not {\"String\": ...} or {\"Regex\": ...}");
  if (j.contains("String")) return {j.at("String").get<std::string>(), ""};
  if (j.contains("Regex")) {
    std::string re = j.at("Regex").get<std::string>();
    TFM_CHECK(!re.empty(), kWhere, "empty Regex pattern");
    return {"", re};
  }
  fail(kWhere, "pattern ", j.dump(), " is not {\"String\": ...} or {\"Regex\": ...}");
}

PrependScheme prepend_scheme(const json& j) {
  if (j.contains("prepend_scheme")) {
    const std::string s = j.at("prepend_scheme").get<std::string>();
    if (s == "always") return PrependScheme::always;
    if (s == "first") return PrependScheme::first;
    if (s == "never") return PrependScheme::never;
    fail(kWhere, "Metaspace prepend_scheme '", s, "' (supported: always, first, never)");
  }
  return flag(j, "add_prefix_space", true) ? PrependScheme::always : PrependScheme::never;  // older files
}

}  // namespace

std::unique_ptr<Normalizer> normalizer_from_json(const json& j) {
  if (j.is_null()) return nullptr;
  const std::string t = type_of(j, "normalizer");
  if (t == "NFC") return make_unicode_normalizer(uprops::Form::nfc);
  if (t == "NFD") return make_unicode_normalizer(uprops::Form::nfd);
  if (t == "NFKC") return make_unicode_normalizer(uprops::Form::nfkc);
  if (t == "NFKD") return make_unicode_normalizer(uprops::Form::nfkd);
  if (t == "Lowercase") return make_lowercase();
  if (t == "StripAccents") return make_strip_accents();
  if (t == "Strip") return make_strip(flag(j, "strip_left", true), flag(j, "strip_right", true));
  if (t == "Replace") {
    const auto [lit, re] = pattern(j.at("pattern"));
    return make_replace(lit, re, j.at("content").get<std::string>());
  }
  if (t == "Prepend") return make_prepend(j.at("prepend").get<std::string>());
  if (t == "BertNormalizer") {
    const bool lower = flag(j, "lowercase", true);
    return make_bert_normalizer(flag(j, "clean_text", true), flag(j, "handle_chinese_chars", true),
                                flag(j, "strip_accents", lower), lower);
  }
  if (t == "Precompiled") return make_precompiled(decode_base64(str(j, "precompiled_charsmap")));
  if (t == "Sequence") {
    std::vector<std::unique_ptr<Normalizer>> parts;
    for (const auto& n : j.at("normalizers")) parts.push_back(normalizer_from_json(n));
    return make_normalizer_sequence(std::move(parts));
  }
  unknown("normalizer", t,
          "NFC, NFD, NFKC, NFKD, Lowercase, StripAccents, Strip, Replace, Prepend, BertNormalizer, Precompiled, Sequence");
}

std::unique_ptr<PreTokenizer> pre_tokenizer_from_json(const json& j) {
  if (j.is_null()) return nullptr;
  const std::string t = type_of(j, "pre_tokenizer");
  if (t == "ByteLevel") return make_byte_level_pre(flag(j, "add_prefix_space", true), flag(j, "use_regex", true));
  if (t == "Split") {
    const auto [lit, re] = pattern(j.at("pattern"));
    return make_split(lit, re, split_behavior_from_name(j.at("behavior").get<std::string>(), kWhere),
                      flag(j, "invert", false));
  }
  if (t == "Whitespace") return make_whitespace();
  if (t == "WhitespaceSplit") return make_whitespace_split();
  if (t == "BertPreTokenizer") return make_bert_pre();
  if (t == "Metaspace")
    return make_metaspace(one_char(str(j, "replacement", "\xE2\x96\x81"), "Metaspace replacement"), prepend_scheme(j),
                          flag(j, "split", true));
  if (t == "Punctuation") return make_punctuation(split_behavior_from_name(str(j, "behavior", "Isolated"), kWhere));
  if (t == "Digits") return make_digits(flag(j, "individual_digits", false));
  if (t == "CharDelimiterSplit") return make_char_delimiter(one_char(str(j, "delimiter"), "CharDelimiterSplit delimiter"));
  if (t == "Sequence") {
    std::vector<std::unique_ptr<PreTokenizer>> parts;
    for (const auto& p : j.at("pretokenizers")) parts.push_back(pre_tokenizer_from_json(p));
    return make_pre_sequence(std::move(parts));
  }
  unknown("pre_tokenizer", t,
          "ByteLevel, Split, Whitespace, WhitespaceSplit, BertPreTokenizer, Metaspace, Punctuation, Digits, "
          "CharDelimiterSplit, Sequence");
}

std::unique_ptr<Decoder> decoder_from_json(const json& j) {
  if (j.is_null()) return nullptr;
  const std::string t = type_of(j, "decoder");
  if (t == "ByteLevel") return make_byte_level_decoder();
  if (t == "Metaspace")
    return make_metaspace_decoder(one_char(str(j, "replacement", "\xE2\x96\x81"), "Metaspace replacement"),
                                  prepend_scheme(j));
  if (t == "WordPiece") return make_wordpiece_decoder(str(j, "prefix", "##"), flag(j, "cleanup", true));
  if (t == "ByteFallback") return make_byte_fallback_decoder();
  if (t == "Fuse") return make_fuse_decoder();
  if (t == "Strip")
    return make_strip_decoder(one_char(str(j, "content", " "), "Strip content"),
                              static_cast<std::size_t>(json_int_or(j, "start", 0, "Strip start", 0)),
                              static_cast<std::size_t>(json_int_or(j, "stop", 0, "Strip stop", 0)));
  if (t == "Replace") {
    const auto [lit, re] = pattern(j.at("pattern"));
    return make_replace_decoder(lit, re, j.at("content").get<std::string>());
  }
  if (t == "BPEDecoder") return make_bpe_decoder(str(j, "suffix", "</w>"));
  if (t == "CTC")
    return make_ctc_decoder(str(j, "pad_token", "<pad>"), str(j, "word_delimiter_token", "|"), flag(j, "cleanup", true));
  if (t == "Sequence") {
    std::vector<std::unique_ptr<Decoder>> parts;
    for (const auto& d : j.at("decoders")) parts.push_back(decoder_from_json(d));
    return make_decoder_sequence(std::move(parts));
  }
  unknown("decoder", t, "ByteLevel, Metaspace, WordPiece, ByteFallback, Fuse, Strip, Replace, BPEDecoder, CTC, Sequence");
}

std::unique_ptr<PostProcessor> post_processor_from_json(const json& j, const std::vector<std::string>& id_to_token) {
  if (j.is_null()) return nullptr;
  const std::string t = type_of(j, "post_processor");
  auto token_pair = [&](const char* key) {
    const json& p = j.at(key);
    TFM_CHECK(p.is_array() && p.size() == 2, kWhere, t, " ", key, " is not [token, id]");
    const auto id = json_int(p[1], t + " " + key + " id");
    TFM_CHECK(id >= 0 && static_cast<std::size_t>(id) < id_to_token.size(), kWhere, t, " ", key, " id ", id,
              " out of range");
    return std::make_pair(p[0].get<std::string>(), static_cast<std::int32_t>(id));
  };
  if (t == "TemplateProcessing") {
    const json& st = j.at("special_tokens");
    auto pieces = [&](const json& arr) {
      std::vector<TemplatePiece> out;
      for (const auto& item : arr) {
        TemplatePiece p;
        if (item.contains("Sequence")) {
          p.is_sequence = true;
          const std::string id = item.at("Sequence").at("id").get<std::string>();
          TFM_CHECK(id == "A" || id == "B", kWhere, "template sequence id '", id, "' is not A or B");
          p.sequence = id == "A" ? 0 : 1;
          p.type_id = static_cast<std::int32_t>(json_int_or(item.at("Sequence"), "type_id", 0, "template type_id", 0, 255));
        } else {
          const std::string name = item.at("SpecialToken").at("id").get<std::string>();
          p.type_id = static_cast<std::int32_t>(json_int_or(item.at("SpecialToken"), "type_id", 0, "template type_id", 0, 255));
          TFM_CHECK(st.contains(name), kWhere, "template names special token '", name, "' missing from special_tokens");
          for (const auto& id : st.at(name).at("ids")) {
            const auto v = json_int(id, "template token '" + name + "' id");
            TFM_CHECK(v >= 0 && static_cast<std::size_t>(v) < id_to_token.size(), kWhere, "template token '", name,
                      "' id ", v, " out of range");
            p.ids.push_back(static_cast<std::int32_t>(v));
          }
          for (const auto& tk : st.at(name).at("tokens")) p.tokens.push_back(tk.get<std::string>());
          TFM_CHECK(p.tokens.size() == p.ids.size(), kWhere, "template token '", name, "': ids and tokens differ in length");
        }
        out.push_back(std::move(p));
      }
      return out;
    };
    return make_template(pieces(j.at("single")), pieces(j.contains("pair") ? j.at("pair") : j.at("single")));
  }
  if (t == "BertProcessing") return make_bert_processing(token_pair("sep"), token_pair("cls"));
  if (t == "RobertaProcessing")
    return make_roberta_processing(token_pair("sep"), token_pair("cls"), flag(j, "trim_offsets", true),
                                   flag(j, "add_prefix_space", true));
  if (t == "ByteLevel") return make_byte_level_post(flag(j, "trim_offsets", true));
  if (t == "Sequence") {
    std::vector<std::unique_ptr<PostProcessor>> parts;
    for (const auto& p : j.at("processors")) parts.push_back(post_processor_from_json(p, id_to_token));
    return make_post_sequence(std::move(parts));
  }
  unknown("post_processor", t, "TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel, Sequence");
}

std::int64_t json_int(const nlohmann::json& v, const std::string& what, std::int64_t lo, std::int64_t hi) {
  const bool big_unsigned = v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX);
  TFM_CHECK(v.is_number_integer() && !big_unsigned, kWhere, what, " must be an integer, got ", v.dump());
  const auto i = v.get<std::int64_t>();
  TFM_CHECK(i >= lo && i <= hi, kWhere, what, " ", i, " is out of range [", lo, ", ", hi, "]");
  return i;
}

std::int64_t json_int_or(const nlohmann::json& j, const char* key, std::int64_t fallback, const std::string& what,
                         std::int64_t lo, std::int64_t hi) {
  if (!j.is_object() || !j.contains(key) || j.at(key).is_null()) return fallback;
  return json_int(j.at(key), what, lo, hi);
}

}  // namespace tfm::tok
