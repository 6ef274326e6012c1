// Contrastive image-text models (CLIP: model_type "clip") at work: texts and pictures into
// the shared space, and zero-shot classification of pictures against label texts.
//
//   LoadedModel m = load_model("models/clip");
//   TextEmbeddingCache cache;
//   auto r = zero_shot_classify(m, {load_image("cat.jpg")}, {"a photo of a cat", "a photo of a dog"}, &cache);
//   r[0].name, r[0].probability
//
// Texts go through the tokenizer with its special tokens (CLIP's <|startoftext|> ... <|endoftext|>),
// cut to the text tower's positions with the end token kept, padded in one batch; pictures
// through the directory's preprocessor_config.json.
#pragma once

#include <cstddef>
#include <list>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "tfm/image.h"
#include "tfm/inspect.h"
#include "tfm/model_dir.h"

namespace tfm {

// Unit-length text embeddings by text, the least recently used dropped past `capacity`:
// label texts a server sees again are not run through the text tower again. Safe to share
// between threads. One cache serves one model.
class TextEmbeddingCache {
 public:
  explicit TextEmbeddingCache(std::size_t capacity = 4096) : capacity_(capacity) {}
  bool find(const std::string& text, std::vector<float>& out);
  void put(const std::string& text, const std::vector<float>& embedding);
  std::size_t size() const;
  std::size_t hits() const;

 private:
  mutable std::mutex mu_;
  std::size_t capacity_, hits_ = 0;
  std::list<std::string> order_;  // most recent first
  std::map<std::string, std::pair<std::vector<float>, std::list<std::string>::iterator>> entries_;
};

// What CLIP's text tower reads for texts: ids (B, T) and valid lengths (B). Each text is the
// tokenizer's ids with its special tokens, cut to the tower's positions (the last one kept: the
// end token the embedding is read at), padded with the end token as CLIP's tokenizer pads.
// (tfm eval's zero-shot labels go through it too.)
struct TextTowerInput {
  Tensor ids, lens;
};
TextTowerInput text_tower_input(const Tokenizer& tok, const TextTowerConfig& tower, const std::vector<std::string>& texts);
// Each text's embedding in the shared space (get_text_features), unit length when normalize.
// With a cache (normalize only), texts it holds are not recomputed and new ones are added.
std::vector<std::vector<float>> contrastive_text_embeddings(LoadedModel& m, const std::vector<std::string>& texts,
                                                            bool normalize = true, TextEmbeddingCache* cache = nullptr);
// Each picture's (get_image_features), unit length when normalize.
std::vector<std::vector<float>> contrastive_image_embeddings(LoadedModel& m, const std::vector<Image>& images,
                                                             bool normalize = true);
// Each picture's probabilities over the label texts: the softmax of exp(logit_scale) times
// the cosine similarities, as CLIPModel's logits_per_image. Classification::name is the
// label text, label its index.
std::vector<Classification> zero_shot_classify(LoadedModel& m, const std::vector<Image>& images,
                                               const std::vector<std::string>& labels, TextEmbeddingCache* cache = nullptr);

}  // namespace tfm
