// Fuzz target: a request body as `tfm serve` reads it: parse_body (UTF-8, nesting depth, an
// object), then the generation parameters /v1/completions and /v1/chat/completions take
// (parse_generation: types, ranges, stop lists, logit_bias...). Bad input must be an ApiError
// with a 4xx status or a tfm::Error (the route wrapper answers 400 for it); any other exception
// would reach the client as a 500, so it fails the property (1e400 did: issue 31).
#include <cstdint>
#include <exception>
#include <string>

#include "api_error.h"
#include "fuzz_check.h"
#include "request_params.h"
#include "serve_options.h"
#include "tfm/error.h"

namespace {

template <class Fn>
void expect_client_error(Fn&& fn) {
  try {
    fn();
  } catch (const tfm::server::ApiError& e) {
    tfm::fuzz::require(e.status >= 400 && e.status < 500, "request errors are 4xx");
  } catch (const tfm::Error&) {
    // the routes' wrapper answers 400
  } catch (const std::exception&) {
    tfm::fuzz::require(false, "request errors are ApiError or tfm::Error (anything else is a 500)");
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string body(reinterpret_cast<const char*>(data), size);
  const tfm::server::ServeOptions so;
  expect_client_error([&] {
    const tfm::server::Json b = tfm::server::parse_body(body, so.max_json_depth);
    for (const bool chat : {false, true}) expect_client_error([&] { (void)tfm::server::parse_generation(b, so, chat); });
    (void)tfm::server::dump(b);  // the text an error message quotes: never throws
  });
  return 0;
}
