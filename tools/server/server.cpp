// serve(): the HTTP server's set-up, authentication, CORS, access log and shutdown.
#include "server.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <pthread.h>
#include <thread>

#include "guarded_server.h"
#include "routes.h"
#include "tfm/error.h"
#include "tfm/load.h"
#include "tfm/memory_plan.h"
#include "tfm/safetensors.h"

namespace tfm::server {

namespace {

// The "user" field as one log token: printable ASCII only (others as '?'), at most 64 bytes,
// so that a client cannot forge or split log lines.
std::string user_for_log(const std::string& user) {
  std::string out;
  for (const char ch : user.substr(0, 64)) out += (ch > ' ' && ch < 127) ? ch : '?';
  return out;
}

}  // namespace

AccessInfo& access_info() {
  thread_local AccessInfo info;  // httplib handles a request, and streams it, on one worker thread
  return info;
}

void send_json(httplib::Response& res, const Json& j, int status) {
  res.status = status;
  res.set_content(dump(j), "application/json");
}

void send_error(httplib::Response& res, const ApiError& e) { send_json(res, e.to_json(), e.status); }

httplib::Server::Handler guarded(std::function<void(const httplib::Request&, httplib::Response&)> fn) {
  return [fn = std::move(fn)](const httplib::Request& req, httplib::Response& res) {
    try {
      fn(req, res);
    } catch (const ApiError& e) {
      send_error(res, e);
    } catch (const tfm::Error& e) {
      send_error(res, ApiError(400, "invalid_request_error", "invalid_value", e.what()));
    } catch (const std::exception& e) {
      send_error(res, ApiError(500, "server_error", "internal_error", e.what()));
    }
  };
}

namespace {

// Equal-time comparison: the time taken does not depend on where the strings differ.
bool same_secret(const std::string& a, const std::string& b) {
  const std::size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < n; ++i)
    diff |= static_cast<unsigned char>((i < a.size() ? a[i] : 0) ^ (i < b.size() ? b[i] : 0));
  return diff == 0;
}

const char* status_type(int status) {
  return status == 401 ? "authentication_error" : status == 404 ? "not_found_error" : status >= 500 ? "server_error" : "invalid_request_error";
}

std::string last_component(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const auto slash = dir.rfind('/');
  return slash == std::string::npos ? dir : dir.substr(slash + 1);
}

// The write end of serve()'s stop pipe while it runs (a signal handler can only reach a global).
volatile sig_atomic_t g_stop_fd = -1;

void on_stop_signal(int sig) {
  const int saved = errno;
  const char why = sig == SIGINT ? 'I' : 'T';
  if (g_stop_fd >= 0) (void)!write(g_stop_fd, &why, 1);
  errno = saved;
}

}  // namespace

SessionOptions serving_session(const LoadedModel& lm, const ServeOptions& opt) {
  SessionOptions so;
  so.ctx_size = opt.ctx_size;
  so.max_batch = opt.parallel;
  so.cache_type = dtype_from_name(opt.cache_type);
  return session_for(lm, so);
}

std::optional<SpeculativeOptions> serving_speculation(const LoadedModel& lm, const ServeOptions& opt) {
  TFM_CHECK(opt.draft_model.empty() || !opt.lookup, "serve", "give --draft-model or --lookup, not both");
  if (opt.draft_model.empty() && !opt.lookup) return std::nullopt;
  TFM_CHECK(lm.config.architecture == Architecture::decoder_only && lm.config.head == HeadKind::lm, "serve",
            "speculative decoding (--draft-model, --lookup) drafts for models that generate (decoder-only)");
  return SpeculativeOptions{nullptr, opt.draft_max, opt.lookup_ngram};
}

int serve(LoadedModel& lm, const ServeOptions& opt, BatchMirror* mirror) {
  TFM_CHECK(opt.parallel >= 1 && opt.parallel <= 256, "serve", "--parallel must be in [1, 256], got ", opt.parallel);
  TFM_CHECK(opt.queue >= 0, "serve", "--queue must be >= 0, got ", opt.queue);
  TFM_CHECK(opt.timeout_s >= 1, "serve", "--timeout must be >= 1 second, got ", opt.timeout_s);
  TFM_CHECK(opt.max_body_bytes >= 1024, "serve", "--max-body-bytes must be >= 1024, got ", opt.max_body_bytes);
  // SIGINT/SIGTERM are blocked in every thread the server starts and caught by a handler that
  // writes to a pipe, which one waiting thread reads: no request thread is interrupted. A
  // handler, not sigwait alone, because threads that libraries start before main (OpenBLAS's
  // pool, loaded with FAISS) leave the signals unblocked and may be the ones that receive them.
  // SIGPIPE (a client gone mid-write) is an error return, not a death.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  int stop_pipe[2];
  TFM_CHECK(pipe2(stop_pipe, O_CLOEXEC) == 0, "serve", "pipe: ", std::strerror(errno));
  g_stop_fd = stop_pipe[1];
  struct sigaction on_stop_action = {};
  on_stop_action.sa_handler = on_stop_signal;
  sigemptyset(&on_stop_action.sa_mask);
  on_stop_action.sa_flags = SA_RESTART;
  sigaction(SIGINT, &on_stop_action, nullptr);
  sigaction(SIGTERM, &on_stop_action, nullptr);

  Metrics metrics;
  const SessionOptions so = serving_session(lm, opt);
  // Speculative decoding: a draft model loaded beside the model (same tokenizer), or prompt lookup.
  std::unique_ptr<LoadedModel> draft;
  std::optional<SpeculativeOptions> spec = serving_speculation(lm, opt);
  if (mirror != nullptr)
    TFM_CHECK(opt.draft_model.empty() && opt.retrieve_dir.empty(), "serve", opt.draft_model.empty() ? "--retrieve" :
              "--draft-model", " is not served with a model split over processes (its model calls would run on rank 0 "
              "alone); --lookup drafts without a model");
  if (spec) {
    if (!opt.draft_model.empty()) {
      LoadOptions lo;
      lo.dtype = opt.draft_dtype;
      lo.ctx = so.ctx_size;
      lo.batch = so.max_batch;
      draft = std::make_unique<LoadedModel>(load_model(opt.draft_model, lo));
      TFM_CHECK(draft->tokenizer.vocab_size() == lm.tokenizer.vocab_size(), "--draft-model", "its tokenizer has ",
                draft->tokenizer.vocab_size(), " tokens; the model's has ", lm.tokenizer.vocab_size());
      spec->draft = &draft->model;
    }
    std::fprintf(stderr, "tfm serve: speculative decoding: %s, drafts up to %lld tokens\n",
                 draft ? ("draft model " + opt.draft_model).c_str() : "prompt lookup", static_cast<long long>(opt.draft_max));
  }
  Scheduler sched(lm, so, opt.prefill_chunk, opt.queue, metrics, opt.cache_ram_mib << 20, spec ? &*spec : nullptr, mirror);
  ServerContext cx{opt, lm, sched, metrics, {}, 0, {}, {}, {}, {}};
  cx.model_id = opt.model_name.empty() ? last_component(opt.model_dir) : opt.model_name;
  if (!opt.retrieve_dir.empty()) {
    TFM_CHECK(lm.config.architecture == Architecture::decoder_only && lm.config.head == HeadKind::lm, "--retrieve",
              "retrieval puts passages into prompts: it needs a model that generates (decoder-only)");
    cx.index = std::make_unique<PassageIndex>(PassageIndex::open(opt.retrieve_dir));
    cx.retriever = std::make_unique<LoadedModel>(load_model(cx.index->encoder_path()));
    cx.index->check_encoder(*cx.retriever);
    cx.retrieve_template = opt.retrieve_template.empty() ? default_retrieval_template() : read_file(opt.retrieve_template);
    std::fprintf(stderr, "tfm serve: retrieval: %lld passages from %s, %lld a request\n",
                 static_cast<long long>(cx.index->size()), opt.retrieve_dir.c_str(), static_cast<long long>(opt.retrieve_k));
  }
  cx.created = std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  // The template the loaded tokenizer carries (tokenizer_config.json), else the directory's
  // file read directly, else ChatML.
  const TokenizerConfig& tc = lm.tokenizer.config();
  if (!tc.chat_template.empty()) {
    cx.chat_cfg = ChatTemplateConfig{tc.chat_template, tc.bos_token, tc.eos_token, false};
  } else {
    try {
      cx.chat_cfg = load_chat_template_config(opt.model_dir);
    } catch (const tfm::Error&) {  // not a directory (a GGUF file)
      cx.chat_cfg = ChatTemplateConfig{chatml_template(), "", "", true};
    }
  }
  std::fprintf(stderr, "tfm serve: chat template: %s\n", cx.chat_cfg.is_default ? "ChatML (the model has none)" : "the model's own");
  cx.chat.emplace(cx.chat_cfg.template_text);

  // Slow or idle clients cannot make others wait: a thread per connection (up to
  // --max-connections), a per-address limit and a deadline for each request's head.
  GuardedServer svr({static_cast<std::size_t>(opt.max_connections), static_cast<std::size_t>(opt.max_client_connections),
                     std::chrono::milliseconds(opt.header_timeout_s * 1000)});
  // httplib's own cap is the largest any route takes (uploads to a speech model); each route
  // enforces its own limit as it reads (RouteTable).
  svr.set_payload_max_length(static_cast<std::size_t>(
      lm.config.reads_audio() ? std::max(opt.max_body_bytes, opt.max_upload_bytes) : opt.max_body_bytes));
  svr.set_keep_alive_timeout(opt.idle_timeout_s);
  svr.set_keep_alive_max_count(100);
  svr.set_read_timeout(30);
  // Nagle's algorithm held each keep-alive response's last segment until the client's delayed
  // ACK (+40 ms a request, and on every stream's first event).
  svr.set_tcp_nodelay(true);
  svr.set_write_timeout(30);

  thread_local std::chrono::steady_clock::time_point request_start;
  svr.set_pre_routing_handler([&](const httplib::Request& req, httplib::Response& res) {
    request_start = std::chrono::steady_clock::now();
    access_info() = AccessInfo{};
    access_info().id = "req-" + std::to_string(cx.next_id++);
    res.set_header("X-Request-Id", access_info().id);
    if (!opt.cors_origin.empty()) {
      res.set_header("Access-Control-Allow-Origin", opt.cors_origin);
      res.set_header("Vary", "Origin");
      if (req.method == "OPTIONS") {
        res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
        res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type");
        res.set_header("Access-Control-Max-Age", "600");
        res.status = 204;
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    // The key guards everything but /health and the playground's static files (they hold no
    // data; the page sends the key the user types with its API calls).
    const bool open = req.path == "/health" || (req.method == "GET" && is_static_path(req.path));
    if (!opt.api_key.empty() && !open) {
      const std::string auth = req.get_header_value("Authorization");
      const std::string given = auth.rfind("Bearer ", 0) == 0 ? auth.substr(7) : std::string();
      if (!same_secret(given, opt.api_key)) {
        send_error(res, ApiError(401, "authentication_error", "invalid_api_key",
                                 given.empty() ? "missing API key: send Authorization: Bearer KEY" : "invalid API key"));
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // Errors httplib produces itself (no route, body too large, bad request line) in OpenAI's shape.
  svr.set_error_handler(httplib::Server::HandlerWithResponse([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
    const std::string msg = res.status == 404   ? "no route " + req.method + " " + req.path
                            : res.status == 413 ? "the request body is larger than --max-body-bytes"
                                                : std::string("HTTP ") + std::to_string(res.status);
    send_json(res, ApiError(res.status, status_type(res.status), res.status == 413 ? "body_too_large" : "http_error", msg).to_json(),
              res.status);
    return httplib::Server::HandlerResponse::Handled;
  }));
  svr.set_logger([&](const httplib::Request& req, const httplib::Response& res) {
    // A request httplib refused before routing (an unknown method, a bad request line) never
    // set request_start: it counts with no duration, not the time since this thread's last one
    // (or since boot).
    const auto now = std::chrono::steady_clock::now();
    const double s = request_start == std::chrono::steady_clock::time_point{}
                         ? 0.0
                         : std::chrono::duration<double>(now - request_start).count();
    request_start = {};
    ++metrics.requests;
    if (res.status >= 400) ++metrics.requests_failed;
    metrics.request_seconds.observe(s);
    const AccessInfo& a = access_info();
    // The request's id, route, status, token counts and latency; never headers (the key).
    if (!opt.quiet)
      std::fprintf(stderr, "tfm serve: %s %s %s %d prompt_tokens=%lld completion_tokens=%lld %.1f ms%s%s\n",
                   a.id.empty() ? "-" : a.id.c_str(), req.method.c_str(), req.path.c_str(), res.status,
                   static_cast<long long>(a.prompt_tokens), static_cast<long long>(a.completion_tokens), s * 1e3,
                   a.user.empty() ? "" : " user=", user_for_log(a.user).c_str());
    access_info() = AccessInfo{};
  });
  RouteTable routes(svr, static_cast<std::size_t>(opt.max_body_bytes));
  add_generation_routes(routes, cx);
  add_model_routes(routes, cx);
  add_audio_routes(routes, cx);
  add_slot_routes(routes, cx);
  add_static_routes(routes);
  routes.refuse_other_methods();

  const int port = opt.port == 0 ? svr.bind_to_any_port(opt.host) : (svr.bind_to_port(opt.host, opt.port) ? opt.port : -1);
  TFM_CHECK(port > 0, "serve", "cannot listen on ", opt.host, ":", opt.port, " (in use, or not an address of this machine)");
  svr.set_listen_backlog(static_cast<int>(std::min<std::int64_t>(opt.max_connections, 4096)));
  const ModelConfig& c = lm.config;
  const std::int64_t ctx = sched.generates() ? sched.batch().context_size() : c.max_positions;
  if (sched.generates())
    std::fprintf(stderr, "tfm serve: model %s (%s), %lld slots x %lld positions, queue %lld\n", cx.model_id.c_str(),
                 to_string(c.architecture), static_cast<long long>(opt.parallel), static_cast<long long>(ctx),
                 static_cast<long long>(opt.queue));
  else
    std::fprintf(stderr, "tfm serve: model %s (%s): %s\n", cx.model_id.c_str(), to_string(c.architecture),
                 c.reads_audio()                                   ? "/v1/audio/transcriptions and /v1/audio/translations"
                 : c.architecture == Architecture::encoder_decoder ? "completions translate the prompt"
                                                                   : "embeddings, classify");
  std::fprintf(stderr, "tfm serve: memory plan: %s\n", summary(plan_memory(c, ctx, sched.generates() ? opt.parallel : 1)).c_str());
  std::printf("tfm serve: listening on http://%s:%d\n", opt.host.c_str(), port);
  std::fflush(stdout);
  std::fflush(stderr);

  std::thread waiter([&] {
    pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);  // the handler may run here too
    char why = 0;
    while (read(stop_pipe[0], &why, 1) < 0 && errno == EINTR) {
    }
    if (why != 'E') std::fprintf(stderr, "tfm serve: %s, shutting down\n", why == 'I' ? "SIGINT" : "SIGTERM");
    sched.stop();  // in-flight requests end with an error, so their handlers return
    svr.stop();
  });
  const bool listened = svr.listen_after_bind();
  if (svr.is_running() || !listened) {  // ended on its own
    const char end = 'E';
    (void)!write(stop_pipe[1], &end, 1);
  }
  waiter.join();
  g_stop_fd = -1;
  std::signal(SIGINT, SIG_DFL);
  std::signal(SIGTERM, SIG_DFL);
  close(stop_pipe[0]);
  close(stop_pipe[1]);
  sched.stop();
  std::fprintf(stderr, "tfm serve: stopped\n");
  return 0;
}

}  // namespace tfm::server
