#include "line_batches.h"

#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cerrno>

#include "tfm/error.h"

namespace tfm::cli {

bool LineBatches::fill(bool block) {
  if (eof_) return false;
  if (!block) {
    pollfd p{STDIN_FILENO, POLLIN, 0};
    if (::poll(&p, 1, 0) <= 0) return true;  // nothing waiting
  }
  char chunk[65536];
  ssize_t n;
  do n = ::read(STDIN_FILENO, chunk, sizeof chunk);
  while (n < 0 && errno == EINTR);
  TFM_CHECK(n >= 0, "stdin", "read failed (errno ", errno, ")");
  if (n == 0) eof_ = true;
  buf_.append(chunk, static_cast<std::size_t>(n));
  return n > 0;
}

std::vector<std::string> LineBatches::next() {
  std::vector<std::string> out;
  std::size_t pos = 0;
  auto take_lines = [&] {
    std::size_t nl;
    while (out.size() < max_ && (nl = buf_.find('\n', pos)) != std::string::npos) {
      std::string line = buf_.substr(pos, nl - pos);
      if (!line.empty() && line.back() == '\r') line.pop_back();
      out.push_back(std::move(line));
      pos = nl + 1;
    }
  };
  for (;;) {
    take_lines();
    if (out.size() >= max_) break;
    if (eof_) {
      if (pos < buf_.size() && out.size() < max_) {  // a last line without '\n'
        std::string line = buf_.substr(pos);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        out.push_back(std::move(line));
        pos = buf_.size();
      }
      break;
    }
    // Have lines: take more only if already waiting. Have none: wait for input.
    const std::size_t before = buf_.size();
    fill(/*block=*/out.empty());
    if (!out.empty() && buf_.size() == before && !eof_) break;
  }
  buf_.erase(0, pos);
  return out;
}

void for_each_input_batch(const std::string* text, std::size_t max,
                          const std::function<void(const std::vector<std::string>&)>& run) {
  if (text != nullptr) {
    run({*text});
    return;
  }
  LineBatches lines(max);
  for (auto batch = lines.next(); !batch.empty(); batch = lines.next()) run(batch);
}

void for_each_image_batch(const std::vector<std::string>& files, std::size_t max,
                          const std::function<void(const std::vector<Image>&, std::size_t first)>& run) {
  for (std::size_t first = 0; first < files.size(); first += max) {
    std::vector<Image> batch;
    for (std::size_t i = first; i < std::min(files.size(), first + max); ++i) batch.push_back(read_image(files[i]));
    run(batch, first);
    std::fflush(stdout);
  }
}

}  // namespace tfm::cli
