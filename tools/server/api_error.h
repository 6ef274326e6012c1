// OpenAI-style errors: {"error": {"message", "type", "code"}} with an HTTP status.
#pragma once

#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace tfm::server {

struct ApiError : std::runtime_error {
  int status;
  std::string type, code, param;
  ApiError(int status_, std::string type_, std::string code_, const std::string& message, std::string param_ = "")
      : std::runtime_error(message), status(status_), type(std::move(type_)), code(std::move(code_)),
        param(std::move(param_)) {}
  nlohmann::json to_json() const;
};

// 400 invalid_request_error naming the parameter.
[[noreturn]] void bad_param(const std::string& param, const std::string& message);

inline nlohmann::json error_json(int status, const std::string& type, const std::string& code, const std::string& message) {
  return ApiError(status, type, code, message).to_json();
}

}  // namespace tfm::server
