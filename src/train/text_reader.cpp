// TextReader: chunked line and piece reads of a text file (see text_reader.h).
#include "train/text_reader.h"

#include <filesystem>

#include "tfm/error.h"

namespace tfm::train_detail {

std::size_t utf8_complete_prefix(const char* s, std::size_t n) {
  // Walk back over at most 3 continuation bytes (10xxxxxx) to the lead byte of the last character.
  std::size_t i = n, back = 0;
  while (i > 0 && back < 3 && (static_cast<unsigned char>(s[i - 1]) & 0xC0) == 0x80) --i, ++back;
  if (i == 0) return n;  // only continuation bytes: malformed, keep them
  const auto lead = static_cast<unsigned char>(s[i - 1]);
  const std::size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
  return need > back + 1 && need > 1 ? i - 1 : n;  // the last character is cut: stop before its lead byte
}

TextReader::TextReader(const std::string& path, std::size_t chunk_bytes)
    : path_(path), in_(path, std::ios::binary), chunk_(chunk_bytes < 8 ? 8 : chunk_bytes) {
  TFM_CHECK(in_.good(), path, "cannot open file");
  std::error_code ec;
  size_ = std::filesystem::file_size(path, ec);
}

bool TextReader::refill() {
  if (eof_) return false;
  buf_.erase(0, pos_);
  pos_ = 0;
  const std::size_t old = buf_.size();
  buf_.resize(old + chunk_);
  in_.read(buf_.data() + old, static_cast<std::streamsize>(chunk_));
  const auto got = static_cast<std::size_t>(in_.gcount());
  buf_.resize(old + got);
  if (got < chunk_) {
    TFM_CHECK(!in_.bad(), path_, "read error");
    eof_ = true;
  }
  return got > 0;
}

bool TextReader::next_line(std::string& line) {
  std::size_t scanned = pos_;
  for (;;) {
    const std::size_t nl = buf_.find('\n', scanned);
    if (nl != std::string::npos) {
      std::size_t end = nl;
      if (end > pos_ && buf_[end - 1] == '\r') --end;
      line.assign(buf_, pos_, end - pos_);
      pos_ = nl + 1;
      ++line_;
      return true;
    }
    scanned = buf_.size();
    const std::size_t before = pos_;
    if (!refill()) break;
    scanned -= before;  // refill moved the unread bytes to the front
  }
  if (pos_ >= buf_.size()) return false;
  std::size_t end = buf_.size();  // the last line has no '\n'
  if (buf_[end - 1] == '\r') --end;
  line.assign(buf_, pos_, end - pos_);
  pos_ = buf_.size();
  ++line_;
  return true;
}

bool TextReader::next_piece(std::string& piece) {
  if (buf_.size() - pos_ < chunk_) refill();
  const std::size_t avail = buf_.size() - pos_;
  if (avail == 0) return false;
  std::size_t take = avail;
  if (!eof_ || buf_.size() - pos_ > chunk_) {
    take = std::min(avail, chunk_);
    // Prefer to end after a newline in the second half of the piece (word and BPE tokenizers
    // treat a line end as a boundary); else at a UTF-8 character boundary.
    const std::size_t nl = buf_.rfind('\n', pos_ + take - 1);
    if (nl != std::string::npos && nl >= pos_ + take / 2) {
      take = nl + 1 - pos_;
    } else if (take < avail || !eof_) {
      const std::size_t cut = utf8_complete_prefix(buf_.data() + pos_, take);
      if (cut > 0) take = cut;
    }
  }
  piece.assign(buf_, pos_, take);
  pos_ += take;
  return true;
}

}  // namespace tfm::train_detail
