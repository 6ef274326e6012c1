// Parsing and checking request bodies: JSON with depth and size limits, typed field getters
// whose errors are OpenAI's 400 naming the parameter, and the sampling parameters shared by
// /v1/completions and /v1/chat/completions.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "serve_options.h"
#include "tfm/generate.h"
#include "tfm/grammar.h"
#include "tfm/load.h"
#include "tfm/session.h"

namespace tfm::server {

using Json = nlohmann::ordered_json;

// The body as a JSON object; malformed JSON, invalid UTF-8, nesting past max_depth or a
// non-object body give a 400.
Json parse_body(const std::string& body, std::int64_t max_depth);
// 400 "Unrecognized request argument supplied: X" for a key outside `known`.
void reject_unknown(const Json& body, std::initializer_list<const char*> known);

std::optional<std::int64_t> get_int(const Json& b, const char* key, std::int64_t lo, std::int64_t hi);
std::optional<double> get_number(const Json& b, const char* key, double lo, double hi);
std::optional<bool> get_bool(const Json& b, const char* key);
std::optional<std::string> get_string(const Json& b, const char* key);

// What both generation endpoints share, read from the body.
struct GenerationParams {
  // The body's temperature, top_p, top_k, min_p, repeat_penalty, max_tokens, num_beams and
  // length_penalty as given: resolve_generation puts the model's generation_config.json under
  // them, then OpenAI's defaults.
  DecodeRequest asked;
  GenerateOptions options;                // seed, penalties' window, OpenAI penalties, stop, ignore_eos
  std::optional<std::int64_t> max_tokens; // as asked (completions: default 16; chat: the rest of the context)
  std::int64_t n = 1;
  bool stream = false, include_usage = false;
  std::int64_t top_logprobs = -1;         // < 0: no logprobs
};
// response_format ({"type": "json_object"} or {"type": "json_schema", "json_schema": {...}})
// or llama.cpp's "grammar" (GBNF) as a grammar; null for plain text. 400 naming the parameter
// when it does not compile.
std::shared_ptr<const Grammar> parse_output_grammar(const Json& b);
// `max_tokens_key`: "max_tokens" (chat also accepts "max_completion_tokens").
GenerationParams parse_generation(const Json& b, const ServeOptions& so, bool chat);
// The decoding of a request: what the body asked, over the model's generation_config.json
// (tfm/load.h: its end ids always, its sampling settings when the body leaves them out), over
// OpenAI's defaults (temperature 1, top_p 1, top_k and min_p off, `default_max_tokens`).
Decoding resolve_generation(const GenerationParams& p, const LoadedModel& lm, std::int64_t default_max_tokens,
                            std::int64_t prompt_tokens);

// The text a JSON value holds, dumped with invalid UTF-8 replaced (never throws).
std::string dump(const Json& j);

}  // namespace tfm::server
