#include "grammar/rules.h"

#include <algorithm>
#include <functional>

#include "tfm/error.h"

namespace tfm {
namespace {

std::int32_t sat_add(std::int32_t a, std::int32_t b) { return std::min(kGrammarInf, a + b); }

std::int32_t elem_len(const GrammarRules& r, const GrammarElem& e) {
  return e.kind == GrammarElem::bytes ? 1 : e.kind == GrammarElem::ref ? r.min_len[static_cast<std::size_t>(e.value)] : 0;
}

// The matcher expands references until a byte is next; a rule that can reach itself without
// taking a byte would expand forever.
void check_left_recursion(const GrammarRules& r, const std::string& where) {
  const std::size_t n = r.alternatives.size();
  std::vector<std::vector<std::int32_t>> first(n);  // rules reachable before any byte
  for (std::size_t k = 0; k < n; ++k)
    for (const std::int32_t start : r.alternatives[k])
      for (auto i = static_cast<std::size_t>(start); r.elems[i].kind == GrammarElem::ref; ++i) {
        first[k].push_back(r.elems[i].value);
        if (r.min_len[static_cast<std::size_t>(r.elems[i].value)] != 0) break;
      }
  std::vector<int> color(n, 0);  // 0 new, 1 on the path, 2 done
  std::vector<std::int32_t> path;
  std::function<void(std::int32_t)> visit = [&](std::int32_t k) {
    color[static_cast<std::size_t>(k)] = 1;
    path.push_back(k);
    for (const std::int32_t s : first[static_cast<std::size_t>(k)]) {
      if (color[static_cast<std::size_t>(s)] == 1) {
        std::string cycle;
        for (auto it = std::find(path.begin(), path.end(), s); it != path.end(); ++it) cycle += r.names[static_cast<std::size_t>(*it)] + " -> ";
        fail(where, "left recursion: ", cycle, r.names[static_cast<std::size_t>(s)], " (a rule must take a character before it can repeat itself)");
      }
      if (color[static_cast<std::size_t>(s)] == 0) visit(s);
    }
    path.pop_back();
    color[static_cast<std::size_t>(k)] = 2;
  };
  for (std::size_t k = 0; k < n; ++k)
    if (color[k] == 0) visit(static_cast<std::int32_t>(k));
}

}  // namespace

void finish_rules(GrammarRules& r, const std::string& where) {
  const std::size_t n = r.alternatives.size();
  r.min_len.assign(n, kGrammarInf);
  for (bool changed = true; changed;) {
    changed = false;
    for (std::size_t k = 0; k < n; ++k)
      for (const std::int32_t start : r.alternatives[k]) {
        std::int32_t len = 0;
        for (auto i = static_cast<std::size_t>(start); r.elems[i].kind != GrammarElem::end; ++i) len = sat_add(len, elem_len(r, r.elems[i]));
        if (len < r.min_len[k]) {
          r.min_len[k] = len;
          changed = true;
        }
      }
  }
  r.min_rest.assign(r.elems.size(), 0);
  for (std::size_t i = r.elems.size(); i-- > 0;)
    r.min_rest[i] = r.elems[i].kind == GrammarElem::end ? 0 : sat_add(elem_len(r, r.elems[i]), r.min_rest[i + 1]);
  if (r.min_len[static_cast<std::size_t>(r.root)] >= kGrammarInf) fail(where, "rule 'root' matches no text (every alternative recurses forever)");
  check_left_recursion(r, where);
}

}  // namespace tfm
