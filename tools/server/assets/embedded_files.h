// Files compiled into the binary (the playground page of `tfm serve`): every file of
// tools/server/playground/ becomes bytes in a generated source (cmake/embed_files.cmake), so
// the server needs no files beside it and no install step.
//
//   if (const EmbeddedFile* f = find_embedded_file("/")) respond(f->content_type, f->bytes);
#pragma once

#include <cstddef>
#include <span>
#include <string_view>

namespace tfm::serve {

struct EmbeddedFile {
  std::string_view path;          // "/index.html": relative to tools/server/playground/, leading '/'
  std::string_view content_type;  // "text/html; charset=utf-8" (by extension)
  std::string_view bytes;         // the file's exact bytes
};

// The table the generated source defines (sorted by path).
extern const EmbeddedFile kEmbeddedFiles[];
extern const std::size_t kEmbeddedFileCount;

std::span<const EmbeddedFile> embedded_files();

// The file a GET of `url_path` serves: the exact path, or "/" and any path ending in '/' ->
// that folder's index.html. Query strings ("?x=1") are ignored. nullptr: no such file.
const EmbeddedFile* find_embedded_file(std::string_view url_path);

}  // namespace tfm::serve
