// The HTTP side shared by the route files: the server's state and response helpers.
#pragma once

#include <httplib.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>

#include "api_error.h"
#include "metrics.h"
#include "request_params.h"
#include "scheduler.h"
#include "serve_options.h"
#include "tfm/chat_template.h"
#include "tfm/contrastive.h"
#include "tfm/model_dir.h"
#include "tfm/retrieval.h"
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
  // --retrieve: the index, its encoder (one request at a time) and the prompt template.
  std::unique_ptr<PassageIndex> index = {};
  std::unique_ptr<LoadedModel> retriever = {};
  std::string retrieve_template = {};
  std::mutex retrieve_mu = {};
  // CLIP: the label texts' embeddings, kept across /v1/classify requests.
  TextEmbeddingCache label_cache{4096};
  // What the model jobs read (model_jobs.h): on the scheduler thread only.
  JobContext jobs() { return JobContext{lm, opt, translator}; }
};

// What the access log line reports about the request being handled on this thread.
struct AccessInfo {
  std::string id;
  std::string user;  // the body's "user" (an end-user id), logged
  std::int64_t prompt_tokens = 0, completion_tokens = 0;
};
AccessInfo& access_info();

void send_json(httplib::Response& res, const Json& j, int status = 200);
void send_error(httplib::Response& res, const ApiError& e);
// Wraps a handler: ApiError -> its status; tfm::Error -> 400; anything else -> 500.
httplib::Server::Handler guarded(std::function<void(const httplib::Request&, httplib::Response&)> fn);

// The routes registered on a server, so that a known path asked with another method is a 405
// naming the allowed ones (Allow header) rather than a 404 that says the path does not exist.
// Bodies are read through our own receiver, counted after any Content-Encoding is undone, so
// --max-body-bytes bounds chunked and gzip bodies too (cpp-httplib 0.11.4 reads those whole:
// CVE-2025-46728); a body past the limit is a 413 and the connection is closed.
class RouteTable {
 public:
  RouteTable(httplib::Server& svr, std::size_t max_body_bytes) : svr_(svr), max_body_(max_body_bytes) {}
  void get(const std::string& path, httplib::Server::Handler fn);
  // max_body: this route's limit instead of --max-body-bytes (0: that). A multipart/form-data
  // body (an upload) arrives parsed into req.files, its parts counted against the limit.
  void post(const std::string& path, httplib::Server::Handler fn, std::size_t max_body = 0,
            const char* flag = "--max-body-bytes");  // the option that sets the limit, for the 413's message
  // After every route: GET, POST, PUT, DELETE and PATCH on a known path that lacks them -> 405;
  // a body sent to any other path is not read (404).
  void refuse_other_methods();

 private:
  httplib::Server& svr_;
  std::size_t max_body_;
  std::map<std::string, std::set<std::string>> methods_;  // path -> the methods it has
};

void add_generation_routes(RouteTable& routes, ServerContext& cx);  // routes_generate.cpp

// Every key the generation endpoints take (a request with any other is a 400 naming it). Each
// is honoured or refused with a 400 that names it: tests/server/request_keys.js walks them.
inline const std::initializer_list<const char*> kCompletionKeys = {
    "model", "prompt", "max_tokens", "temperature", "top_p", "n", "stream", "stream_options", "logprobs", "echo",
    "stop", "presence_penalty", "frequency_penalty", "best_of", "logit_bias", "seed", "suffix", "user", "top_k",
    "min_p", "repeat_penalty", "repeat_last_n", "ignore_eos", "num_beams", "length_penalty", "response_format", "grammar",
    "retrieve", "speculative"};
inline const std::initializer_list<const char*> kChatKeys = {
    "model", "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p", "n", "stream",
    "stream_options", "stop", "presence_penalty", "frequency_penalty", "logit_bias", "logprobs", "top_logprobs",
    "seed", "user", "top_k", "min_p", "repeat_penalty", "repeat_last_n", "ignore_eos", "response_format", "grammar",
    "tools", "tool_choice", "parallel_tool_calls", "retrieve", "speculative"};
// The completion keys that only shape sampling or streaming: refused for translation models.
inline const std::initializer_list<const char*> kSamplingOnlyKeys = {
    "temperature", "top_p", "top_k", "min_p", "repeat_penalty", "repeat_last_n", "presence_penalty",
    "frequency_penalty", "seed", "stop", "logprobs", "echo", "stream_options", "ignore_eos", "best_of", "logit_bias",
    "suffix", "response_format", "grammar"};
void add_model_routes(RouteTable& routes, ServerContext& cx);       // routes_model.cpp
void add_static_routes(RouteTable& routes);                          // routes_static.cpp
void add_slot_routes(RouteTable& routes, ServerContext& cx);        // routes_slots.cpp
void add_audio_routes(RouteTable& routes, ServerContext& cx);       // routes_audio.cpp
bool is_static_path(const std::string& path);                          // a playground file (no key needed)

}  // namespace tfm::server
