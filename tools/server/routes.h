// The HTTP side shared by the route files: the server's state and response helpers.
#pragma once

#include <httplib.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "api_error.h"
#include "metrics.h"
#include "request_params.h"
#include "scheduler.h"
#include "serve_options.h"
#include "tfm/chat_template.h"
#include "tfm/model_dir.h"
#include "tfm/session.h"

namespace tfm::server {

struct ServerContext {
  const ServeOptions& opt;
  LoadedModel& lm;
  Scheduler& sched;
  Metrics& metrics;
  std::string model_id;
  std::int64_t created = 0;                  // unix seconds at start
  ChatTemplateConfig chat_cfg;
  std::optional<ChatTemplate> chat;          // parsed once
  std::unique_ptr<Translator> translator;    // encoder-decoder models; used on the scheduler thread only
  std::atomic<std::uint64_t> next_id{1};
};

// What the access log line reports about the request being handled on this thread.
struct AccessInfo {
  std::string id;
  std::int64_t prompt_tokens = 0, completion_tokens = 0;
};
AccessInfo& access_info();

void send_json(httplib::Response& res, const Json& j, int status = 200);
void send_error(httplib::Response& res, const ApiError& e);
// Wraps a handler: ApiError -> its status; tfm::Error -> 400; anything else -> 500.
httplib::Server::Handler guarded(std::function<void(const httplib::Request&, httplib::Response&)> fn);

void add_generation_routes(httplib::Server& svr, ServerContext& cx);  // routes_generate.cpp
void add_model_routes(httplib::Server& svr, ServerContext& cx);       // routes_model.cpp
void add_static_routes(httplib::Server& svr);                          // routes_static.cpp
bool is_static_path(const std::string& path);                          // a playground file (no key needed)

}  // namespace tfm::server
