// String helpers (see strings.h).
#include "chat/strings.h"

#include <array>

#include "chat/value.h"

namespace tfm::chat {

namespace {
bool is_word(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
char upper(char c) { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c; }
char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
}  // namespace

std::int64_t utf16_length(const std::string& s) {
  std::int64_t n = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if ((c & 0xC0) != 0x80) n += c >= 0xF0 ? 2 : 1;  // a lead byte; 4-byte sequences are surrogate pairs
  }
  return n;
}

std::string ascii_upper(std::string s) {
  for (char& c : s) c = upper(c);
  return s;
}

std::string ascii_lower(std::string s) {
  for (char& c : s) c = lower(c);
  return s;
}

std::string title_case(const std::string& s) {
  std::string out = s;
  for (std::size_t i = 0; i < out.size(); ++i)
    if (is_word(out[i]) && (i == 0 || !is_word(out[i - 1]))) out[i] = upper(out[i]);
  return out;
}

std::string capitalize(const std::string& s) {
  std::string out = s;
  if (!out.empty()) out[0] = upper(out[0]);
  return out;
}

std::vector<std::string> split_string(const std::string& s, const std::string* sep, std::int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep == nullptr) {
    // Runs of white space separate; none at the ends. With maxsplit, the last part keeps the rest.
    const std::string text = js_trim(s, true, false);
    const auto chars = utf8_chars(text);
    std::size_t i = 0, byte = 0;
    while (i < chars.size()) {
      while (i < chars.size() && js_trim(chars[i], true, false).empty()) byte += chars[i++].size();
      if (i >= chars.size()) break;
      const std::size_t start = byte;
      while (i < chars.size() && !js_trim(chars[i], true, false).empty()) byte += chars[i++].size();
      if (maxsplit != -1 && static_cast<std::int64_t>(out.size()) >= maxsplit) {
        out.push_back(text.substr(start));
        break;
      }
      out.push_back(text.substr(start, byte - start));
    }
    return out;
  }
  std::size_t start = 0;
  for (;;) {
    const std::size_t at = s.find(*sep, start);
    if (at == std::string::npos) break;
    out.push_back(s.substr(start, at - start));
    start = at + sep->size();
  }
  out.push_back(s.substr(start));
  if (maxsplit != -1 && static_cast<std::int64_t>(out.size()) > maxsplit) {
    std::string rest;
    for (std::size_t i = static_cast<std::size_t>(maxsplit); i < out.size(); ++i)
    {
      if (i > static_cast<std::size_t>(maxsplit)) rest += *sep;
      rest += out[i];
    }
    out.resize(static_cast<std::size_t>(maxsplit));
    out.push_back(rest);
  }
  return out;
}

std::string replace_string(const std::string& s, const std::string& from, const std::string& to, std::int64_t count) {
  if (count == 0) return s;
  std::int64_t left = count < 0 ? -1 : count;
  std::string out;
  if (from.empty()) {  // an empty pattern matches before every character and at the end
    for (const std::string& c : utf8_chars(s)) {
      if (left != 0) { out += to; if (left > 0) --left; }
      out += c;
    }
    if (left != 0) out += to;
    return out;
  }
  std::size_t start = 0;
  while (left != 0) {
    const std::size_t at = s.find(from, start);
    if (at == std::string::npos) break;
    out.append(s, start, at - start);
    out += to;
    start = at + from.size();
    if (left > 0) --left;
  }
  out.append(s, start, std::string::npos);
  return out;
}

std::string strftime_local(const std::string& format, std::time_t t) {
  static const std::array<const char*, 12> months{"January", "February", "March",     "April",   "May",      "June",
                                                  "July",    "August",   "September", "October", "November", "December"};
  std::tm tm{};
  localtime_r(&t, &tm);
  auto pad2 = [](int v) {
    std::string s(v < 10 ? 1 : 0, '0');
    s += std::to_string(v);
    return s;
  };
  std::string out;
  for (std::size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%' || i + 1 >= format.size()) {
      out += format[i];
      continue;
    }
    const char c = format[i + 1];
    const std::string month = months[static_cast<std::size_t>(tm.tm_mon)];
    switch (c) {
      case 'Y': out += std::to_string(tm.tm_year + 1900); break;
      case 'm': out += pad2(tm.tm_mon + 1); break;
      case 'd': out += pad2(tm.tm_mday); break;
      case 'b': out += month.substr(0, 3); break;
      case 'B': out += month; break;
      case 'H': out += pad2(tm.tm_hour); break;
      case 'M': out += pad2(tm.tm_min); break;
      case '%': out += '%'; break;
      default: out += format.substr(i, 2);  // other directives are left as written
    }
    ++i;
  }
  return out;
}

}  // namespace tfm::chat
