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

bool is_static_path(const std::string& path) {
  if (path == "/") return true;
  for (const EmbeddedFile& f : embedded_files())
    if (path == std::string("/") + f.name) return true;
  return false;
}

}  // namespace tfm::server
