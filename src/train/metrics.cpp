// metrics.jsonl: append-only, one JSON object per line ({"step", "split", "loss", ...}).
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unistd.h>

#include "tfm/error.h"
#include "tfm/safetensors.h"
#include "train/train_internal.h"

namespace tfm::train_detail {

void append_metrics_line(const std::string& path, const std::string& json_line) {
  std::FILE* f = std::fopen(path.c_str(), "ab");
  TFM_CHECK(f != nullptr, path, "cannot open for appending: ", std::strerror(errno));
  const std::string line = json_line + "\n";
  errno = 0;
  const bool ok = std::fwrite(line.data(), 1, line.size(), f) == line.size() && std::fflush(f) == 0 &&
                  ::fsync(::fileno(f)) == 0;
  const int err = errno;
  const bool closed = std::fclose(f) == 0;
  TFM_CHECK(ok && closed, path, "write failed: ", std::strerror(ok ? errno : err));
}

Curves reload_metrics(const std::string& path, std::int64_t up_to_step) {
  Curves c;
  if (!std::filesystem::exists(path)) return c;
  std::istringstream in(read_file(path));
  std::string line, kept;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception&) {
      continue;  // a line cut short by a kill: drop it
    }
    if (!j.contains("step") || j["step"].get<std::int64_t>() > up_to_step) continue;
    kept += line + "\n";
    const std::int64_t step = j["step"].get<std::int64_t>();
    if (j.value("split", "") == "train" && j.contains("loss")) c.train_loss.push_back({step, j["loss"].get<double>()});
    if (j.value("split", "") == "val" && j.contains("loss")) c.val_loss.push_back({step, j["loss"].get<double>()});
  }
  write_file_atomic(path, kept);
  return c;
}

}  // namespace tfm::train_detail
