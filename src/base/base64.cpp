#include "base/base64.h"

#include <cstdint>

#include "tfm/error.h"

namespace tfm {
namespace {
constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int sextet(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '+') return 62;
  if (c == '/') return 63;
  return -1;
}
}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (std::size_t i = 0; i < bytes.size(); i += 3) {
    const std::uint32_t n = (static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i])) << 16) |
                            (i + 1 < bytes.size() ? static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8 : 0) |
                            (i + 2 < bytes.size() ? static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[i + 2])) : 0);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[n & 63] : '=';
  }
  return out;
}

std::string base64_decode(std::string_view text, const std::string& where) {
  std::string out;
  out.reserve(text.size() / 4 * 3);
  std::uint32_t acc = 0;
  int bits = 0, padding = 0;
  std::size_t symbols = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ' ' || c == '\n' || c == '\r' || c == '\t') continue;
    if (c == '=') {
      ++padding;
      continue;
    }
    const int v = sextet(c);
    TFM_CHECK(v >= 0, where, "not base64: byte ", i, " has code ", static_cast<int>(static_cast<unsigned char>(c)),
              ", outside the alphabet");
    TFM_CHECK(padding == 0, where, "not base64: data after '=' padding at byte ", i);
    acc = (acc << 6) | static_cast<std::uint32_t>(v);
    bits += 6;
    ++symbols;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  TFM_CHECK(symbols % 4 != 1 && padding <= 2, where, "not base64: ", symbols, " symbols and ", padding,
            " '=' cannot come from an encoder");
  return out;
}

}  // namespace tfm
