// The files of tools/server/playground/, embedded at build time (embed_files.cmake).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace tfm::server {

struct EmbeddedFile {
  const char* name;              // path under playground/, '/'-separated
  const unsigned char* data;
  std::size_t size;
};

const std::vector<EmbeddedFile>& embedded_files();

// Content-Type by extension (html, js, css, svg, png, json, ico; else octet-stream).
std::string content_type_for(const std::string& name);

}  // namespace tfm::server
