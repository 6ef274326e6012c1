// POST /slots/{id}?action=save|restore|erase (llama-server's shape): the prompt cache in files
// of the directory the operator names with --slot-save-path. tfm's slots share one prompt cache
// (docs/structured_output.md), so a slot's save writes every cached block, and a restore gives
// them to every slot; the id is checked and echoed. A file name from a request is a plain name
// in that directory, never a path. A model split over processes saves one file per rank (each
// rank's part of the blocks: model_jobs.h).
#include <chrono>
#include <filesystem>

#include "routes.h"
#include "tfm/error.h"

namespace tfm::server {
namespace {

std::string checked_filename(const Json& b) {
  const auto name = get_string(b, "filename");
  if (!name) bad_param("filename", "filename is required");
  bool ok = !name->empty() && name->size() <= 128 && (*name)[0] != '.' && name->find("..") == std::string::npos;
  for (const char c : *name)
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-');
  if (!ok) bad_param("filename", "filename must be a plain file name of 1 to 128 characters [A-Za-z0-9._-], not starting with '.'");
  return *name;
}

// On the scheduler thread: the job on this rank's batch (the other ranks of a split model run
// it on theirs).
std::int64_t run_prompt_cache(ServerContext& cx, const ModelJob& job) {
  JobContext jobs = cx.jobs();
  jobs.batch = &cx.sched.batch_for_jobs();
  return run_model_job(jobs, job).blocks;
}

void slot_action(ServerContext& cx, const httplib::Request& req, httplib::Response& res) {
  if (!cx.sched.generates())
    throw ApiError(400, "invalid_request_error", "model_not_supported", "this model does not generate: it has no slots");
  if (cx.opt.slot_save_path.empty())
    throw ApiError(501, "invalid_request_error", "not_supported", "slots are saved and restored only with --slot-save-path DIR");
  const std::int64_t id = std::stoll(req.matches[1].str().substr(0, 9));
  if (id < 0 || id >= cx.sched.batch().slots())
    bad_param("id_slot", "slot " + std::to_string(id) + " does not exist (0.." + std::to_string(cx.sched.batch().slots() - 1) + ")");
  const Json b = req.body.empty() ? Json::object() : parse_body(req.body, cx.opt.max_json_depth);
  const std::string action = req.get_param_value("action");
  const auto start = std::chrono::steady_clock::now();
  auto ms = [&] { return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count(); };
  if (action == "erase") {
    reject_unknown(b, {});
    std::int64_t n = 0;
    const ModelJob job = prompt_cache_job("erase", "", cx.model_id);
    cx.sched.run_job([&] { n = run_prompt_cache(cx, job); }, &job);
    return send_json(res, {{"id_slot", id}, {"n_erased", n}});
  }
  if (action != "save" && action != "restore") bad_param("action", "action must be save, restore or erase");
  reject_unknown(b, {"filename"});
  const std::string name = checked_filename(b);
  const std::string path = (std::filesystem::path(cx.opt.slot_save_path) / name).string();
  std::int64_t blocks = 0, tokens = 0;
  try {
    const ModelJob job = prompt_cache_job(action, path, cx.model_id);
    cx.sched.run_job([&] {
      blocks = run_prompt_cache(cx, job);
      tokens = blocks * cx.sched.batch_for_jobs().prefill_chunk();
    }, &job);
  } catch (const tfm::Error& e) {
    // The message without the server's directory: the client knows the file by its name.
    std::string what = e.what();
    for (std::size_t at; (at = what.find(path)) != std::string::npos;) what.replace(at, path.size(), name);
    throw ApiError(400, "invalid_request_error", "invalid_value", "cannot " + action + " '" + name + "': " + what, "filename");
  }
  std::error_code ec;
  const auto bytes = static_cast<std::int64_t>(std::filesystem::file_size(path, ec));
  if (action == "save")
    send_json(res, {{"id_slot", id}, {"filename", name}, {"n_saved", tokens}, {"n_written", ec ? 0 : bytes}, {"timings", {{"save_ms", ms()}}}});
  else
    send_json(res, {{"id_slot", id}, {"filename", name}, {"n_restored", tokens}, {"n_read", ec ? 0 : bytes}, {"timings", {{"restore_ms", ms()}}}});
}

}  // namespace

void add_slot_routes(RouteTable& routes, ServerContext& cx) {
  routes.post(R"(/slots/(\d+))", guarded([&cx](const httplib::Request& req, httplib::Response& res) { slot_action(cx, req, res); }));
}

}  // namespace tfm::server
