// UTF-8 encoding of one code point, shared by the tokenizers (src/tokenize) and the metrics'
// text handling (src/metrics). Decoders differ on purpose (the tokenizers reject invalid
// input, the metrics replace it as Python does), so only the encoder lives here.
#pragma once

#include <cstdint>
#include <string>

namespace tfm {

// Appends code point `cp` (< 0x110000) to `out` as 1 to 4 bytes.
inline void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace tfm
