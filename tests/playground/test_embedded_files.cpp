// The playground's files as compiled into the binary (cmake/embed_files.cmake) equal the files
// in tools/server/playground/ byte for byte, carry a browser content type, and the page asks
// for nothing outside the server that serves it (no CDN, no external fonts or scripts).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "embedded_files.h"

namespace fs = std::filesystem;
using tfm::serve::embedded_files;
using tfm::serve::find_embedded_file;

namespace {

fs::path playground_dir() {
  const char* src = std::getenv("TFM_SOURCE_DIR");
  return fs::path(src ? src : TFM_SOURCE_DIR_DEFAULT) / "tools" / "server" / "playground";
}

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
    std::string url("/");
    url += fs::relative(e.path(), playground_dir()).generic_string();
    const auto* f = find_embedded_file(url);
    ASSERT_NE(f, nullptr) << url << " is not embedded";
    EXPECT_EQ(f->bytes, read_bytes(e.path())) << url << " differs from the file on disk";
  }
  EXPECT_GT(on_disk, 0u);
  EXPECT_EQ(embedded_files().size(), on_disk);
}

TEST(EmbeddedFiles, IndexIsServedForTheRootWithItsContentType) {
  const auto* root = find_embedded_file("/");
  ASSERT_NE(root, nullptr);
  EXPECT_EQ(root->path, "/index.html");
  EXPECT_EQ(root->content_type, "text/html; charset=utf-8");
  EXPECT_EQ(find_embedded_file("/?theme=dark"), root);
  EXPECT_EQ(find_embedded_file("/index.html"), root);
  EXPECT_EQ(find_embedded_file("/missing.js"), nullptr);
  EXPECT_EQ(find_embedded_file("/../CMakeLists.txt"), nullptr);
}

TEST(EmbeddedFiles, PageLoadsNothingFromOtherHosts) {
  const std::string page(find_embedded_file("/")->bytes);
  // Any src/href/url()/import/fetch naming a scheme or a protocol-relative host.
  const std::regex external(R"re((src|href|action)\s*=\s*["']?\s*(https?:)?//|url\(\s*["']?(https?:)?//|@import|fetch\(\s*["'`](https?:)?//)re",
                            std::regex::icase);
  std::smatch m;
  EXPECT_FALSE(std::regex_search(page, m, external)) << "external reference: " << m.str();
  // The endpoints it does use are the server's own, by absolute path.
  EXPECT_NE(page.find("\"/v1/chat/completions\""), std::string::npos);
}
