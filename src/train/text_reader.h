// Streaming reads of training files: a fixed-size buffer refilled from the file, so reading a
// multi-GB file never holds its whole text (nor a copy of it) in memory.
//
//   TextReader r(path);                 // 1 MiB chunks by default
//   std::string line;
//   while (r.next_line(line)) ...       // '\n' or "\r\n" removed; a last line without '\n' counts
//   std::string piece;
//   while (r.next_piece(piece)) ...     // the text in pieces that end after a '\n' where one is
//                                       // near, never inside a UTF-8 character
//
// Lines and pieces are exact: concatenating the pieces gives the file's bytes back; the lines
// are the file split at '\n' with one trailing '\r' dropped. line_number() counts lines read.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

namespace tfm::train_detail {

class TextReader {
 public:
  explicit TextReader(const std::string& path, std::size_t chunk_bytes = std::size_t{1} << 20);
  bool next_line(std::string& line);
  bool next_piece(std::string& piece);
  std::int64_t line_number() const { return line_; }
  const std::string& path() const { return path_; }
  std::uint64_t file_bytes() const { return size_; }

 private:
  bool refill();  // appends up to chunk_ bytes to buf_ (after dropping consumed bytes); false at EOF
  std::string path_;
  std::ifstream in_;
  std::size_t chunk_;
  std::string buf_;      // unread bytes are buf_[pos_, end)
  std::size_t pos_ = 0;
  bool eof_ = false;
  std::int64_t line_ = 0;
  std::uint64_t size_ = 0;
};

// Length of the longest prefix of s[0, n) that ends on a UTF-8 character boundary (drops an
// incomplete multi-byte sequence at the end; a malformed byte counts as a character).
std::size_t utf8_complete_prefix(const char* s, std::size_t n);

}  // namespace tfm::train_detail
