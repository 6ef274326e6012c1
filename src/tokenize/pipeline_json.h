// tokenizer.json readers of the pipeline's parts (pipeline_load.cpp, pipeline_build.cpp).
#pragma once

#include <nlohmann/json.hpp>

#include "tokenize/pipeline.h"

namespace tfm::tok {

std::unique_ptr<Normalizer> normalizer_from_json(const nlohmann::json& j);
std::unique_ptr<PreTokenizer> pre_tokenizer_from_json(const nlohmann::json& j);
std::unique_ptr<Decoder> decoder_from_json(const nlohmann::json& j);
std::unique_ptr<PostProcessor> post_processor_from_json(const nlohmann::json& j, const std::vector<std::string>& id_to_token);
std::shared_ptr<const Pipeline> pipeline_from_document(const nlohmann::json& j);
std::string decode_base64(const std::string& s);

}  // namespace tfm::tok
