// Look-ups in the table of embedded files (the table itself is generated: embedded_files.h).
#include "embedded_files.h"

#include <string>

namespace tfm::serve {

std::span<const EmbeddedFile> embedded_files() { return {kEmbeddedFiles, kEmbeddedFileCount}; }

const EmbeddedFile* find_embedded_file(std::string_view url_path) {
  if (const auto q = url_path.find_first_of("?#"); q != std::string_view::npos) url_path = url_path.substr(0, q);
  std::string path(url_path);
  if (path.empty() || path.back() == '/') path += "index.html";
  if (path.front() != '/') path.insert(path.begin(), '/');
  for (const EmbeddedFile& f : embedded_files())
    if (f.path == path) return &f;
  return nullptr;
}

}  // namespace tfm::serve
