// String helpers with JavaScript's semantics where @huggingface/jinja relies on them (UTF-16
// lengths, \b\w title case, str.split rules), on UTF-8 text. Case mapping is ASCII only.
#pragma once

#include <cstdint>
#include <ctime>
#include <string>
#include <vector>

namespace tfm::chat {

std::int64_t utf16_length(const std::string& s);
std::string ascii_upper(std::string s);
std::string ascii_lower(std::string s);
std::string title_case(const std::string& s);   // upper-cases each letter or digit that starts a word
std::string capitalize(const std::string& s);   // first character upper-cased, the rest kept
// Python str.split(sep, maxsplit): sep null splits on runs of white space.
std::vector<std::string> split_string(const std::string& s, const std::string* sep, std::int64_t maxsplit);
// str.replace(old, new, count): count < 0 replaces all.
std::string replace_string(const std::string& s, const std::string& from, const std::string& to, std::int64_t count);
// strftime_now's subset: %Y %m %d %b %B %H %M %%, local time, English month names.
std::string strftime_local(const std::string& format, std::time_t t);

}  // namespace tfm::chat
