// RouteTable (routes.h): the server's routes, their bodies read with --max-body-bytes counted
// after decoding, and 405 / 404 answers that never read a body.
#include <cstdlib>

#include "guarded_server.h"
#include "routes.h"

namespace tfm::server {

void RouteTable::get(const std::string& path, httplib::Server::Handler fn) {
  svr_.Get(path, std::move(fn));
  methods_[path].insert("GET");
}

void RouteTable::post(const std::string& path, httplib::Server::Handler fn, std::size_t max_body, const char* flag) {
  const std::size_t limit = max_body > 0 ? max_body : max_body_;
  const std::string too_large_message = std::string("the request body is larger than ") + flag;
  svr_.Post(path, [fn = std::move(fn), limit, too_large_message](const httplib::Request& req, httplib::Response& res,
                                               const httplib::ContentReader& read) {
    std::string body;
    bool too_large = false;
    httplib::MultipartFormDataItems parts;
    std::size_t part_bytes = 0;
    const bool whole =
        req.is_multipart_form_data()
            ? read(
                  [&](const httplib::MultipartFormData& part) {
                    parts.push_back(part);
                    return parts.size() <= 64;  // a form of this API has a handful of fields
                  },
                  [&](const char* data, std::size_t n) {
                    if (part_bytes + n > limit) return !(too_large = true);
                    part_bytes += n;
                    parts.back().content.append(data, n);
                    return true;
                  })
            : read([&](const char* data, std::size_t n) {
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
      GuardedServer::close_after_response();
      send_error(res, too_large ? ApiError(413, "invalid_request_error", "body_too_large", too_large_message)
                                : ApiError(400, "invalid_request_error", "bad_body", "the request body could not be read"));
      return;
    }
    httplib::Request with_body = req;
    with_body.body = std::move(body);
    for (auto& part : parts) with_body.files.emplace(part.name, std::move(part));
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

}  // namespace tfm::server
