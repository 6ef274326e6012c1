#include "tokenize/regex.h"

#include <oniguruma.h>

#include <mutex>

#include "tfm/error.h"

namespace tfm::tok {

static void init_onig() {
  static std::once_flag once;
  std::call_once(once, [] {
    OnigEncoding enc = ONIG_ENCODING_UTF8;
    onig_initialize(&enc, 1);
  });
}

Regex::Regex(const std::string& pattern, const char* where) : pattern_(pattern) {
  init_onig();
  OnigRegex re = nullptr;
  OnigErrorInfo info;
  const auto* p = reinterpret_cast<const OnigUChar*>(pattern.data());
  const int rc = onig_new(&re, p, p + pattern.size(), ONIG_OPTION_NONE, ONIG_ENCODING_UTF8, ONIG_SYNTAX_DEFAULT, &info);
  if (rc != ONIG_NORMAL) {
    OnigUChar msg[ONIG_MAX_ERROR_MESSAGE_LEN];
    onig_error_code_to_str(msg, rc, &info);
    fail(where, "regex '", pattern, "' does not compile: ", reinterpret_cast<const char*>(msg));
  }
  re_ = re;
}

Regex::~Regex() {
  if (re_) onig_free(static_cast<OnigRegex>(re_));
}

void Regex::find_all(std::string_view text, std::vector<Range>& out) const {
  auto* re = static_cast<OnigRegex>(re_);
  const auto* start = reinterpret_cast<const OnigUChar*>(text.data());
  const auto* end = start + text.size();
  thread_local std::unique_ptr<OnigRegion, void (*)(OnigRegion*)> region(onig_region_new(),
                                                                        [](OnigRegion* r) { onig_region_free(r, 1); });
  // As the onig crate's find_iter: an empty match right where the previous match ended is
  // not reported; the search steps over one character instead.
  std::size_t pos = 0;
  std::int64_t last_match_end = -1;
  while (pos <= text.size()) {
    const int r = onig_search(re, start, end, start + pos, end, region.get(), ONIG_OPTION_NONE);
    if (r < 0) break;  // ONIG_MISMATCH (or an error: no more matches either way)
    const auto b = static_cast<std::uint32_t>(region->beg[0]), e = static_cast<std::uint32_t>(region->end[0]);
    if (b == e && last_match_end == static_cast<std::int64_t>(e)) {
      if (pos >= text.size()) break;
      std::uint32_t cp;
      pos += static_cast<std::size_t>(next_cp(text, pos, cp));
      continue;
    }
    out.push_back({b, e});
    pos = e;
    last_match_end = e;
  }
}

Matches Regex::find_matches(std::string_view text) const {
  Matches m;
  if (text.empty()) {
    m.push_back({{0, 0}, false});
    return m;
  }
  thread_local std::vector<Range> found;
  found.clear();
  find_all(text, found);
  std::uint32_t prev = 0;
  for (const Range& r : found) {
    if (prev != r.begin) m.push_back({{prev, r.begin}, false});
    m.push_back({r, true});
    prev = r.end;
  }
  if (prev != text.size()) m.push_back({{prev, static_cast<std::uint32_t>(text.size())}, false});
  return m;
}

std::string regex_escape(std::string_view literal) {
  std::string out;
  for (char c : literal) {
    if (std::string_view("\\^$.|?*+()[]{}-#&~ \t\n").find(c) != std::string_view::npos) {
      if (c == '\t') { out += "\\t"; continue; }
      if (c == '\n') { out += "\\n"; continue; }
      out += '\\';
    }
    out += c;
  }
  return out;
}

}  // namespace tfm::tok
