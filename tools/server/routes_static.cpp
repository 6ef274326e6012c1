// GET / and GET /<file>: the files of tools/server/playground/, embedded in the binary.
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
  svr_.Post(path, std::move(fn));
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
    if (!allowed.count("GET")) svr_.Get(path, refuse);
    if (!allowed.count("POST")) svr_.Post(path, refuse);
    svr_.Put(path, refuse);
    svr_.Delete(path, refuse);
    svr_.Patch(path, refuse);
  }
}

bool is_static_path(const std::string& path) {
  if (path == "/") return true;
  for (const EmbeddedFile& f : embedded_files())
    if (path == std::string("/") + f.name) return true;
  return false;
}

}  // namespace tfm::server
