// tokenizer.json readers of the pipeline's parts (pipeline_load.cpp, pipeline_build.cpp).
#pragma once

#include <cstdint>

#include <nlohmann/json.hpp>

#include "tokenize/pipeline.h"

namespace tfm::tok {

std::unique_ptr<Normalizer> normalizer_from_json(const nlohmann::json& j);
std::unique_ptr<PreTokenizer> pre_tokenizer_from_json(const nlohmann::json& j);
std::unique_ptr<Decoder> decoder_from_json(const nlohmann::json& j);
std::unique_ptr<PostProcessor> post_processor_from_json(const nlohmann::json& j, const std::vector<std::string>& id_to_token);
std::shared_ptr<const Pipeline> pipeline_from_document(const nlohmann::json& j);
std::string decode_base64(const std::string& s);

// An integer field of tokenizer.json, in [lo, hi]: a float, a string or an out-of-range number
// is a one-line error naming `what` (nlohmann's get<int>() would cast 1e47 to an integer: UB).
std::int64_t json_int(const nlohmann::json& v, const std::string& what, std::int64_t lo = INT64_MIN,
                      std::int64_t hi = INT64_MAX);
// j[key] as json_int when present and not null, else `fallback`.
std::int64_t json_int_or(const nlohmann::json& j, const char* key, std::int64_t fallback, const std::string& what,
                         std::int64_t lo = INT64_MIN, std::int64_t hi = INT64_MAX);

}  // namespace tfm::tok
