// Request body parsing with limits, and the generation parameters (request_params.h).
#include "request_params.h"

#include <chrono>
#include <cmath>

#include "api_error.h"
#include "tfm/error.h"

namespace tfm::server {

nlohmann::json ApiError::to_json() const {
  nlohmann::json e = {{"message", what()}, {"type", type}, {"param", param.empty() ? nlohmann::json() : nlohmann::json(param)},
                      {"code", code.empty() ? nlohmann::json() : nlohmann::json(code)}};
  return {{"error", e}};
}

void bad_param(const std::string& param, const std::string& message) {
  throw ApiError(400, "invalid_request_error", "invalid_value", message, param);
}

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

Json parse_body(const std::string& body, std::int64_t max_depth) {
  if (body.empty()) throw ApiError(400, "invalid_request_error", "invalid_json", "the request body is empty; send a JSON object");
  Json j;
  try {
    // Nesting is checked while parsing, so a deep body costs no more than max_depth frames.
    j = Json::parse(body, [max_depth](int depth, Json::parse_event_t, Json&) {
      if (depth > max_depth)
        throw ApiError(400, "invalid_request_error", "invalid_json", "JSON nested deeper than " + std::to_string(max_depth) + " levels");
      return true;
    });
  } catch (const Json::parse_error& e) {
    throw ApiError(400, "invalid_request_error", "invalid_json", std::string("malformed JSON: ") + e.what());
  } catch (const Json::out_of_range& e) {  // a number beyond a double's range (1e400)
    throw ApiError(400, "invalid_request_error", "invalid_json", std::string("malformed JSON: ") + e.what());
  }
  if (!j.is_object()) throw ApiError(400, "invalid_request_error", "invalid_json", "the request body must be a JSON object");
  return j;
}

void reject_unknown(const Json& body, std::initializer_list<const char*> known) {
  for (const auto& [key, value] : body.items()) {
    bool ok = false;
    for (const char* k : known) ok = ok || key == k;
    if (!ok)
      throw ApiError(400, "invalid_request_error", "unknown_parameter", "Unrecognized request argument supplied: " + key, key);
  }
}

std::optional<std::int64_t> get_int(const Json& b, const char* key, std::int64_t lo, std::int64_t hi) {
  const auto it = b.find(key);
  if (it == b.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer() && !(it->is_number_float() && std::nearbyint(it->get<double>()) == it->get<double>() &&
                                    std::abs(it->get<double>()) < 9e15))
    bad_param(key, std::string(key) + " must be an integer");
  const auto v = it->is_number_float() ? static_cast<std::int64_t>(it->get<double>())
                 : it->is_number_unsigned() && it->get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)
                     ? INT64_MAX
                     : it->get<std::int64_t>();
  if (v < lo || v > hi)
    bad_param(key, std::string(key) + " must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::to_string(v));
  return v;
}

std::optional<double> get_number(const Json& b, const char* key, double lo, double hi) {
  const auto it = b.find(key);
  if (it == b.end() || it->is_null()) return std::nullopt;
  if (!it->is_number()) bad_param(key, std::string(key) + " must be a number");
  const double v = it->get<double>();
  if (!(v >= lo && v <= hi)) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s must be in [%g, %g], got %g", key, lo, hi, v);
    bad_param(key, buf);
  }
  return v;
}

std::optional<bool> get_bool(const Json& b, const char* key) {
  const auto it = b.find(key);
  if (it == b.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) bad_param(key, std::string(key) + " must be a boolean");
  return it->get<bool>();
}

std::optional<std::string> get_string(const Json& b, const char* key) {
  const auto it = b.find(key);
  if (it == b.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) bad_param(key, std::string(key) + " must be a string");
  return it->get<std::string>();
}

GenerationParams parse_generation(const Json& b, const ServeOptions& so, bool chat) {
  GenerationParams p;
  SamplingOptions& s = p.options.sampling;
  DecodeRequest& a = p.asked;
  a.temperature = get_number(b, "temperature", 0, 2);
  a.top_p = get_number(b, "top_p", 0, 1);
  if (a.top_p && *a.top_p <= 0) bad_param("top_p", "top_p must be > 0");
  a.top_k = get_int(b, "top_k", 0, 1 << 30);
  a.min_p = get_number(b, "min_p", 0, 1);
  a.repeat_penalty = get_number(b, "repeat_penalty", 1e-3, 100);
  a.num_beams = get_int(b, "num_beams", 1, 16);
  a.length_penalty = get_number(b, "length_penalty", -10, 10);
  s.repeat_last_n = get_int(b, "repeat_last_n", -1, 1 << 30).value_or(64);
  s.frequency_penalty = get_number(b, "frequency_penalty", -2, 2).value_or(0.0);
  s.presence_penalty = get_number(b, "presence_penalty", -2, 2).value_or(0.0);
  const auto seed = get_int(b, "seed", INT64_MIN, INT64_MAX);
  s.seed = seed ? static_cast<std::uint64_t>(*seed)
                : static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
  p.n = get_int(b, "n", 1, so.max_n).value_or(1);
  if (const auto best_of = get_int(b, "best_of", 1, so.max_n); best_of && *best_of != p.n)
    throw ApiError(400, "invalid_request_error", "unsupported_value", "best_of other than n is not supported", "best_of");
  p.max_tokens = get_int(b, "max_tokens", 0, so.max_tokens_limit);
  if (chat) {  // OpenAI's newer name; the two must not disagree (one would be ignored)
    const auto completion = get_int(b, "max_completion_tokens", 0, so.max_tokens_limit);
    if (completion && p.max_tokens && *completion != *p.max_tokens)
      bad_param("max_completion_tokens", "give max_tokens or max_completion_tokens, not both");
    if (completion) p.max_tokens = completion;
  }
  a.max_new_tokens = p.max_tokens;
  p.stream = get_bool(b, "stream").value_or(false);
  if (const auto it = b.find("stream_options"); it != b.end() && !it->is_null()) {
    if (!it->is_object()) bad_param("stream_options", "stream_options must be an object");
    if (!p.stream) bad_param("stream_options", "stream_options is only allowed with stream: true");
    p.include_usage = get_bool(*it, "include_usage").value_or(false);
  }
  if (const auto it = b.find("stop"); it != b.end() && !it->is_null()) {
    if (it->is_string()) p.options.stop.push_back(it->get<std::string>());
    else if (it->is_array() && it->size() <= 4) {
      for (const auto& x : *it) {
        if (!x.is_string()) bad_param("stop", "stop must be a string or an array of up to 4 strings");
        p.options.stop.push_back(x.get<std::string>());
      }
    } else bad_param("stop", "stop must be a string or an array of up to 4 strings");
    for (const auto& x : p.options.stop)
      if (x.empty()) bad_param("stop", "stop strings must not be empty");
  }
  if (const auto it = b.find("logit_bias"); it != b.end() && !it->is_null() && !(it->is_object() && it->empty()))
    throw ApiError(400, "invalid_request_error", "unsupported_value", "logit_bias is not supported", "logit_bias");
  if (chat) {
    const bool lp = get_bool(b, "logprobs").value_or(false);
    const auto top = get_int(b, "top_logprobs", 0, 20);
    if (top && !lp) bad_param("top_logprobs", "top_logprobs needs logprobs: true");
    p.top_logprobs = lp ? top.value_or(0) : -1;
  } else {
    p.top_logprobs = get_int(b, "logprobs", 0, 20).value_or(-1);
  }
  p.options.stop_at_eos = !get_bool(b, "ignore_eos").value_or(false);
  p.options.context_shift = false;
  p.options.grammar = parse_output_grammar(b);
  return p;
}

std::shared_ptr<const Grammar> parse_output_grammar(const Json& b) {
  // A schema or grammar that does not compile is the client's error, named with its place.
  auto compile = [](const char* param, auto&& make) -> std::shared_ptr<const Grammar> {
    try {
      return std::make_shared<const Grammar>(make());
    } catch (const tfm::Error& e) {
      throw ApiError(400, "invalid_request_error", "invalid_value", e.what(), param);
    }
  };
  std::shared_ptr<const Grammar> g;
  if (const auto it = b.find("response_format"); it != b.end() && !it->is_null()) {
    if (!it->is_object()) bad_param("response_format", "response_format must be an object");
    const std::string type = it->value("type", "");
    if (type == "json_object") {
      g = std::make_shared<const Grammar>(Grammar::json_object());
    } else if (type == "json_schema") {
      const auto js = it->find("json_schema");
      if (js == it->end() || !js->is_object()) bad_param("response_format.json_schema", "response_format.json_schema must be an object");
      for (const auto& [key, value] : js->items())
        if (key != "name" && key != "schema" && key != "strict" && key != "description")
          bad_param("response_format.json_schema", "Unrecognized key in response_format.json_schema: " + key);
      const auto name = get_string(*js, "name");
      if (!name || name->empty() || name->size() > 64) bad_param("response_format.json_schema.name", "response_format.json_schema.name must be a string of 1 to 64 characters");
      get_bool(*js, "strict");
      const auto schema = js->find("schema");
      // No schema: any JSON (OpenAI's json_schema without one accepts any object).
      const std::string text = schema == js->end() || schema->is_null() ? std::string("{\"type\": \"object\"}") : dump(*schema);
      g = compile("response_format.json_schema.schema", [&] { return Grammar::from_json_schema(text, "response_format.json_schema.schema"); });
    } else if (type != "text") {
      bad_param("response_format.type", "response_format.type must be one of text, json_object, json_schema");
    }
  }
  if (const auto it = b.find("grammar"); it != b.end() && !it->is_null()) {
    if (!it->is_string() || it->get<std::string>().empty()) bad_param("grammar", "grammar must be a non-empty GBNF string");
    if (g) bad_param("grammar", "give grammar or a JSON response_format, not both");
    g = compile("grammar", [&] { return Grammar::parse(it->get<std::string>(), "grammar"); });
  }
  return g;
}

Decoding resolve_generation(const GenerationParams& p, const LoadedModel& lm, std::int64_t default_max_tokens,
                            std::int64_t prompt_tokens) {
  const DecodeRequest openai{1.0, 1.0, 0.0, 1.0, 1.0, 0, default_max_tokens, 1, true};
  Decoding d = plan_decoding(lm, p.asked, openai, prompt_tokens);
  GenerateOptions o = p.options;
  const SamplingOptions& s = d.generate.sampling;
  o.sampling.temperature = s.temperature;
  o.sampling.top_p = s.top_p;
  o.sampling.top_k = s.top_k;
  o.sampling.min_p = s.min_p;
  o.sampling.repeat_penalty = s.repeat_penalty;
  o.max_new_tokens = d.generate.max_new_tokens;
  o.eos_ids = d.generate.eos_ids;
  d.generate = o;
  if (!o.stop_at_eos) d.beam.eos_id = -1, d.beam.more_eos_ids.clear();
  return d;
}

}  // namespace tfm::server
