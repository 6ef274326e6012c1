// Corpus files for `tfm index build`: JSON lines with "text" (and "id"), or plain lines.
#include <fstream>
#include <nlohmann/json.hpp>

#include "tfm/error.h"
#include "tfm/retrieval.h"
#include "tfm/tokenizer.h"

namespace tfm {

namespace {
bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}
}  // namespace

std::vector<Passage> read_passages(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  TFM_CHECK(in.good(), path, "cannot open the corpus file");
  const bool jsonl = ends_with(path, ".jsonl");
  std::vector<Passage> out;
  std::string line;
  for (std::int64_t n = 1; std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    const std::string where = path + ":" + std::to_string(n);
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    check_utf8(line, where);
    if (!jsonl) {
      out.push_back({std::to_string(n), line});
      continue;
    }
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      fail(where, "not valid JSON: ", e.what());
    }
    TFM_CHECK(j.is_object() && j.contains("text") && j["text"].is_string(), where,
              "expected an object with a string \"text\"");
    Passage p{std::to_string(n), j["text"].get<std::string>()};
    if (j.contains("id")) {
      TFM_CHECK(j["id"].is_string() || j["id"].is_number_integer(), where, "\"id\" must be a string or an integer");
      p.id = j["id"].is_string() ? j["id"].get<std::string>() : std::to_string(j["id"].get<std::int64_t>());
    }
    TFM_CHECK(!p.text.empty(), where, "\"text\" is empty");
    out.push_back(std::move(p));
  }
  TFM_CHECK(!in.bad(), path, "read error");
  return out;
}

}  // namespace tfm
