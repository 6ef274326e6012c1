// Base64 (RFC 4648, standard alphabet, '=' padding): the server's base64 embeddings and the
// images that requests carry as data: URLs.
#pragma once

#include <string>
#include <string_view>

namespace tfm {

std::string base64_encode(std::string_view bytes);
// Padding optional; ASCII whitespace skipped (line-wrapped payloads). Any other character
// outside the alphabet, or a length no encoder makes, throws tfm::Error naming `where`.
std::string base64_decode(std::string_view text, const std::string& where);

}  // namespace tfm
