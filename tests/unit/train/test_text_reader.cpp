// Streaming reads of training files (src/train/text_reader.h): lines and pieces at every chunk
// size, chunk boundaries inside UTF-8 characters and inside "\r\n", no trailing newline, empty
// files; and the compact token store.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tfm/safetensors.h"
#include "train/text_reader.h"
#include "train/train_internal.h"
#include "support/train_helpers.h"

using namespace tfm;
using namespace tfm::train_detail;
using namespace tfm::train_test;

namespace {

// The obvious twin: split the whole text at '\n', drop one '\r' before it; a last line without
// '\n' counts, an empty tail after the last '\n' does not.
std::vector<std::string> naive_lines(const std::string& text) {
  std::vector<std::string> out;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t nl = text.find('\n', pos);
    const bool last = nl == std::string::npos;
    if (last) nl = text.size();
    std::string line = text.substr(pos, nl - pos);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    out.push_back(line);
    pos = nl + 1;
  }
  return out;
}

bool utf8_boundary_at_end(const std::string& s) {
  return utf8_complete_prefix(s.data(), s.size()) == s.size();
}

const std::string kText =
    "First Citizen:\r\nBefore we proceed — any further, hear me speak.\n\n"
    "我们不能。\r\nΚαλημέρα κόσμε 🙂🙂\n"
    "a\tb\r\n\r\nlast line without newline: é";

}  // namespace

TEST(TextReader, LinesMatchTheWholeFileSplitAtEveryChunkSize) {
  const std::string dir = tmp_dir("reader_lines");
  for (const std::string& text : {kText, kText + "\n", kText + "\r\n", std::string("\n"), std::string("x"),
                                  std::string("\r\n\r\n"), std::string()}) {
    write_file_atomic(dir + "/t.txt", text);
    const auto want = naive_lines(text);
    for (std::size_t chunk : {8, 9, 10, 11, 13, 16, 31, 64, 1 << 20}) {
      TextReader r(dir + "/t.txt", chunk);
      std::vector<std::string> got;
      std::string line;
      while (r.next_line(line)) got.push_back(line);
      EXPECT_EQ(got, want) << "chunk " << chunk << " text size " << text.size();
      EXPECT_EQ(r.line_number(), static_cast<std::int64_t>(want.size()));
    }
  }
  std::filesystem::remove_all(dir);
}

TEST(TextReader, PiecesRebuildTheFileAndNeverCutACharacter) {
  const std::string dir = tmp_dir("reader_pieces");
  std::string big;
  for (int i = 0; i < 40; ++i) big += kText;
  for (const std::string& text : {kText, big, std::string("🙂🙂🙂🙂🙂🙂🙂🙂🙂"), std::string()}) {
    write_file_atomic(dir + "/t.txt", text);
    for (std::size_t chunk : {8, 9, 10, 11, 17, 33, 100, 1 << 20}) {
      TextReader r(dir + "/t.txt", chunk);
      std::string joined, piece;
      int pieces = 0;
      while (r.next_piece(piece)) {
        EXPECT_FALSE(piece.empty());
        EXPECT_LE(piece.size(), chunk + 3) << "a piece may only run on to finish a character";
        EXPECT_TRUE(utf8_boundary_at_end(piece)) << "chunk " << chunk << " piece " << pieces;
        joined += piece;
        ++pieces;
      }
      EXPECT_EQ(joined, text) << "chunk " << chunk;
    }
  }
  std::filesystem::remove_all(dir);
}

TEST(TextReader, Utf8CompletePrefixDropsOnlyACutCharacter) {
  const std::string e = "\xC3\xA9", zh = "\xE6\x88\x91", smile = "\xF0\x9F\x99\x82";
  EXPECT_EQ(utf8_complete_prefix("ab", 2), 2u);
  EXPECT_EQ(utf8_complete_prefix(e.data(), 1), 0u);
  EXPECT_EQ(utf8_complete_prefix(e.data(), 2), 2u);
  const std::string s = "a" + zh + smile;
  for (std::size_t n = 0; n <= s.size(); ++n) {
    const std::size_t want = n < 1 ? 0 : n < 4 ? 1 : n < 8 ? 4 : 8;
    EXPECT_EQ(utf8_complete_prefix(s.data(), n), want) << n;
  }
}

TEST(TextReader, MissingFileIsAClearError) {
  const std::string msg = expect_error([] { TextReader r("/nonexistent/file.txt"); });
  EXPECT_NE(msg.find("/nonexistent/file.txt"), std::string::npos) << msg;
}

TEST(TokenStore, SixteenBitWhenTheVocabFitsElseThirtyTwo) {
  TokenStore narrow(65536), wide(70000);
  EXPECT_EQ(narrow.bytes_per_token(), 2u);
  EXPECT_EQ(wide.bytes_per_token(), 4u);
  narrow.append({0, 1, 65535, 7});
  wide.append({0, 69999, 65536, 7});
  ASSERT_EQ(narrow.size(), 4);
  EXPECT_EQ(narrow[2], 65535);
  EXPECT_EQ(wide[1], 69999);
  const TokenStore tail = wide.slice(2, 4);
  EXPECT_EQ(tail.size(), 2);
  EXPECT_EQ(tail[0], 65536);
  wide.truncate(2);
  EXPECT_EQ(wide.size(), 2);
  EXPECT_NE(expect_error([&] { narrow.append({70000}); }).find("16-bit"), std::string::npos);
}
