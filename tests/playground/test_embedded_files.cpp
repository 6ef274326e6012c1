// The playground's files as compiled into the binary (tools/server/embed_files.cmake) equal the files
// in tools/server/playground/ byte for byte, carry a browser content type, and the page asks
// for nothing outside the server that serves it (no CDN, no external fonts or scripts).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "embedded_files.h"  // tools/server

namespace fs = std::filesystem;
using tfm::server::content_type_for;
using tfm::server::EmbeddedFile;
using tfm::server::embedded_files;

namespace {

fs::path playground_dir() {
  const char* src = std::getenv("TFM_SOURCE_DIR");
  return fs::path(src ? src : TFM_SOURCE_DIR_DEFAULT) / "tools" / "server" / "playground";
}

const EmbeddedFile* find_embedded(const std::string& name) {
  for (const EmbeddedFile& f : embedded_files())
    if (name == f.name) return &f;
  return nullptr;
}

std::string bytes_of(const EmbeddedFile& f) { return {reinterpret_cast<const char*>(f.data), f.size}; }

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST(EmbeddedFiles, EveryPlaygroundFileIsEmbeddedExactly) {
  std::size_t on_disk = 0;
  for (const auto& e : fs::recursive_directory_iterator(playground_dir())) {
    if (!e.is_regular_file()) continue;
    ++on_disk;
    const std::string name = fs::relative(e.path(), playground_dir()).generic_string();
    const EmbeddedFile* f = find_embedded(name);
    ASSERT_NE(f, nullptr) << name << " is not embedded";
    EXPECT_EQ(bytes_of(*f), read_bytes(e.path())) << name << " differs from the file on disk";
  }
  EXPECT_GT(on_disk, 0u);
  EXPECT_EQ(embedded_files().size(), on_disk);
}

TEST(EmbeddedFiles, TheIndexPageHasItsContentType) {
  ASSERT_NE(find_embedded("index.html"), nullptr);
  EXPECT_EQ(content_type_for("index.html"), "text/html; charset=utf-8");
  EXPECT_EQ(content_type_for("app.js"), "text/javascript; charset=utf-8");
  EXPECT_EQ(content_type_for("noext"), "application/octet-stream");
}

TEST(EmbeddedFiles, PageLoadsNothingFromOtherHosts) {
  const EmbeddedFile* index = find_embedded("index.html");
  ASSERT_NE(index, nullptr);
  const std::string page = bytes_of(*index);
  // Any src/href/url()/import/fetch naming a scheme or a protocol-relative host.
  const std::regex external(R"re((src|href|action)\s*=\s*["']?\s*(https?:)?//|url\(\s*["']?(https?:)?//|@import|fetch\(\s*["'`](https?:)?//)re",
                            std::regex::icase);
  std::smatch m;
  EXPECT_FALSE(std::regex_search(page, m, external)) << "external reference: " << m.str();
  // The endpoints it does use are the server's own, by absolute path.
  EXPECT_NE(page.find("\"/v1/chat/completions\""), std::string::npos);
}
