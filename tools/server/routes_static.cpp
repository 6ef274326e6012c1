// GET / and GET /<file>: the files of tools/server/playground/, embedded in the binary.
#include <cstdlib>

#include "embedded_files.h"
#include "routes.h"

namespace tfm::server {

std::string content_type_for(const std::string& name) {
  const auto dot = name.rfind('.');
  const std::string ext = dot == std::string::npos ? "" : name.substr(dot + 1);
  if (ext == "html") return "text/html; charset=utf-8";
  if (ext == "js") return "text/javascript; charset=utf-8";
  if (ext == "css") return "text/css; charset=utf-8";
  if (ext == "svg") return "image/svg+xml";
  if (ext == "png") return "image/png";
  if (ext == "json") return "application/json";
  if (ext == "ico") return "image/x-icon";
  return "application/octet-stream";
}

void add_static_routes(RouteTable& routes) {
  bool has_index = false;
  for (const EmbeddedFile& f : embedded_files()) {
    const std::string name = f.name;
    auto serve_file = [f, name](const httplib::Request&, httplib::Response& res) {
      res.set_content(reinterpret_cast<const char*>(f.data), f.size, content_type_for(name).c_str());
    };
    routes.get("/" + name, serve_file);
    if (name == "index.html") {
      routes.get("/", serve_file);
      has_index = true;
    }
  }
  if (!has_index)
    routes.get("/", [](const httplib::Request&, httplib::Response& res) {
      send_error(res, ApiError(404, "invalid_request_error", "not_found",
                               "this build has no playground page (tools/server/playground/index.html)"));
    });
}

void RouteTable::get(const std::string& path, httplib::Server::Handler fn) {
  svr_.Get(path, std::move(fn));
  methods_[path].insert("GET");
}

void RouteTable::post(const std::string& path, httplib::Server::Handler fn) {
  const std::size_t limit = max_body_;
  svr_.Post(path, [fn = std::move(fn), limit](const httplib::Request& req, httplib::Response& res,
                                               const httplib::ContentReader& read) {
    std::string body;
    bool too_large = false;
    const bool whole = read([&](const char* data, std::size_t n) {
      if (body.size() + n > limit) return !(too_large = true);
      body.append(data, n);
      return true;
    });
    // A Content-Length past the limit: httplib's own check stops the read before our receiver.
    if (!whole && req.has_header("Content-Length") &&
        std::strtoull(req.get_header_value("Content-Length").c_str(), nullptr, 10) > limit)
      too_large = true;
    if (too_large || !whole) {
      res.set_header("Connection", "close");  // the rest of the body is never read
      send_error(res, too_large ? ApiError(413, "invalid_request_error", "body_too_large",
                                           "the request body is larger than --max-body-bytes")
                                : ApiError(400, "invalid_request_error", "bad_body", "the request body could not be read"));
      return;
    }
    httplib::Request with_body = req;
    with_body.body = std::move(body);
    fn(with_body, res);
  });
  methods_[path].insert("POST");
}

void RouteTable::refuse_other_methods() {
  for (const auto& [path, allowed] : methods_) {
    std::string allow;
    for (const auto& m : allowed) allow += (allow.empty() ? "" : ", ") + m;
    auto refuse = [allow](const httplib::Request& req, httplib::Response& res) {
      send_error(res, ApiError(405, "invalid_request_error", "method_not_allowed",
                               req.method + " " + req.path + " is not allowed (allowed: " + allow + ")"));
      res.set_header("Allow", allow);
    };
    // Methods with a body refuse without reading it (a content-reader handler that never reads).
    auto refuse_unread = [refuse](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader&) {
      refuse(req, res);
      res.set_header("Connection", "close");
    };
    if (!allowed.count("GET")) svr_.Get(path, refuse);
    if (!allowed.count("POST")) svr_.Post(path, refuse_unread);
    svr_.Put(path, refuse_unread);
    svr_.Delete(path, refuse_unread);
    svr_.Patch(path, refuse_unread);
  }
  // Any other path: no route, and its body is not read either.
  auto no_route = [](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader&) {
    send_error(res, ApiError(404, "invalid_request_error", "http_error", "no route " + req.method + " " + req.path));
    res.set_header("Connection", "close");
  };
  svr_.Post(".*", no_route);
  svr_.Put(".*", no_route);
  svr_.Delete(".*", no_route);
  svr_.Patch(".*", no_route);
}

bool is_static_path(const std::string& path) {
  if (path == "/") return true;
  for (const EmbeddedFile& f : embedded_files())
    if (path == std::string("/") + f.name) return true;
  return false;
}

}  // namespace tfm::server
