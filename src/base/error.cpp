// tfm::Error: formats "[where] what" once, at construction; closest_name for suggestions.
#include "tfm/error.h"

#include <algorithm>

namespace tfm {

Error::Error(std::string where, std::string what)
    : std::runtime_error("[" + where + "] " + what), where_(std::move(where)) {}

namespace {
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1])});
      diag = up;
    }
  }
  return row[b.size()];
}
}  // namespace

std::string closest_name(std::string_view name, const std::vector<std::string>& candidates, std::size_t max_edits) {
  std::string closest;
  std::size_t best = max_edits + 1;
  for (const auto& c : candidates) {
    const std::size_t d = edit_distance(name, c);
    if (d < best) best = d, closest = c;
  }
  return closest;
}

}  // namespace tfm
