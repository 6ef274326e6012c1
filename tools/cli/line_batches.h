// Lines of stdin in batches for classify/embed: up to `max` lines at once, but never waiting
// for more input while complete lines are at hand, so an interactive user gets each answer
// as soon as the line is typed while a piped file runs in full batches.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tfm/image.h"

namespace tfm::cli {

class LineBatches {
 public:
  explicit LineBatches(std::size_t max) : max_(max) {}
  // The next batch (empty at the end of input). A trailing '\r' is dropped from each line.
  std::vector<std::string> next();

 private:
  bool fill(bool block);  // reads what is available (blocking when asked); false at EOF
  std::size_t max_;
  std::string buf_;
  bool eof_ = false;
};

// classify's and embed's input: `text` when given (one batch of one), else stdin's lines in
// LineBatches of up to `max`; `run` answers each batch.
void for_each_input_batch(const std::string* text, std::size_t max,
                          const std::function<void(const std::vector<std::string>&)>& run);
// classify's and embed's --image files: read in batches of up to `max`; `run` gets each batch
// and the index of its first file, and the output is flushed after each.
void for_each_image_batch(const std::vector<std::string>& files, std::size_t max,
                          const std::function<void(const std::vector<Image>&, std::size_t first)>& run);

}  // namespace tfm::cli
