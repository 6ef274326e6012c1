// CLIP's towers over texts and pictures (tfm/contrastive.h).
#include "tfm/contrastive.h"

#include <cmath>

#include "infer/inspect_util.h"
#include "tfm/autograd.h"
#include "tfm/error.h"
#include "tfm/ops.h"
#include "tfm/sentence_embed.h"

namespace tfm {

using namespace inspect_detail;

bool TextEmbeddingCache::find(const std::string& text, std::vector<float>& out) {
  std::lock_guard<std::mutex> lock(mu_);
  const auto it = entries_.find(text);
  if (it == entries_.end()) return false;
  order_.splice(order_.begin(), order_, it->second.second);  // now the most recent
  out = it->second.first;
  ++hits_;
  return true;
}

void TextEmbeddingCache::put(const std::string& text, const std::vector<float>& embedding) {
  std::lock_guard<std::mutex> lock(mu_);
  if (capacity_ == 0 || entries_.count(text)) return;
  order_.push_front(text);
  entries_[text] = {embedding, order_.begin()};
  while (entries_.size() > capacity_) {
    entries_.erase(order_.back());
    order_.pop_back();
  }
}

std::size_t TextEmbeddingCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

std::size_t TextEmbeddingCache::hits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hits_;
}

namespace {

void check_contrastive(const LoadedModel& m, const char* what) {
  TFM_CHECK(m.config.text_tower.enabled(), what, "a ", m.config.model_type,
            " model has no text tower; zero-shot labels and text-image embeddings need a CLIP model");
  TFM_CHECK(m.tokenizer.vocab_size() > 0, what, "the CLIP model directory has no tokenizer.json for its text tower");
}

std::vector<std::vector<float>> rows_of(const Tensor& t, bool normalize) {
  const Tensor c = contiguous(t);
  const std::int64_t B = c.size(0), D = c.size(1);
  const std::vector<float> v = c.to_floats();
  std::vector<std::vector<float>> out;
  for (std::int64_t b = 0; b < B; ++b) out.emplace_back(v.begin() + b * D, v.begin() + (b + 1) * D);
  if (normalize) normalize_embeddings(out);
  return out;
}

}  // namespace

TextTowerInput text_tower_input(const Tokenizer& tok, const TextTowerConfig& tower, const std::vector<std::string>& texts) {
  std::vector<std::vector<std::int32_t>> seqs;
  std::int64_t T = 1;
  for (const std::string& text : texts) {
    std::vector<std::int32_t> ids = tok.encode_full(text, true).ids;
    TFM_CHECK(!ids.empty(), "text", "'", text, "' gives no tokens");
    if (static_cast<std::int64_t>(ids.size()) > tower.max_positions) {
      const std::int32_t last = ids.back();
      ids.resize(static_cast<std::size_t>(tower.max_positions));
      ids.back() = last;
    }
    T = std::max<std::int64_t>(T, static_cast<std::int64_t>(ids.size()));
    seqs.push_back(std::move(ids));
  }
  const auto B = static_cast<std::int64_t>(seqs.size());
  std::vector<std::int64_t> ids(static_cast<std::size_t>(B * T), tower.eos_token_id), lens;
  for (std::int64_t b = 0; b < B; ++b) {
    const auto& s = seqs[static_cast<std::size_t>(b)];
    std::copy(s.begin(), s.end(), ids.begin() + b * T);
    lens.push_back(static_cast<std::int64_t>(s.size()));
  }
  return {Tensor::from_ints(ids, {B, T}), Tensor::from_ints(lens, {B})};
}

std::vector<std::vector<float>> contrastive_text_embeddings(LoadedModel& m, const std::vector<std::string>& texts,
                                                            bool normalize, TextEmbeddingCache* cache) {
  check_contrastive(m, "text");
  std::vector<std::vector<float>> out(texts.size());
  std::vector<std::size_t> todo;
  for (std::size_t i = 0; i < texts.size(); ++i)
    if (cache == nullptr || !normalize || !cache->find(texts[i], out[i])) todo.push_back(i);
  if (todo.empty()) return out;
  std::vector<std::string> missing;
  for (std::size_t i : todo) missing.push_back(texts[i]);
  const TextTowerInput in = text_tower_input(m.tokenizer, m.config.text_tower, missing);
  NoGradGuard no_grad;
  m.model.set_training(false);
  const auto rows = rows_of(m.model.text_features(in.ids, in.lens), normalize);
  for (std::size_t k = 0; k < todo.size(); ++k) {
    out[todo[k]] = rows[k];
    if (cache != nullptr && normalize) cache->put(texts[todo[k]], rows[k]);
  }
  return out;
}

std::vector<std::vector<float>> contrastive_image_embeddings(LoadedModel& m, const std::vector<Image>& images,
                                                             bool normalize) {
  TFM_CHECK(m.config.text_tower.enabled(), "images", "a ", m.config.model_type, " model has no shared text-image space");
  if (images.empty()) return {};
  NoGradGuard no_grad;
  m.model.set_training(false);
  return rows_of(m.model.image_features(pixel_values_for(m, images)), normalize);
}

std::vector<Classification> zero_shot_classify(LoadedModel& m, const std::vector<Image>& images,
                                               const std::vector<std::string>& labels, TextEmbeddingCache* cache) {
  check_contrastive(m, "labels");
  TFM_CHECK(!labels.empty(), "labels", "zero-shot classification needs at least one label text");
  if (images.empty()) return {};
  const auto text = contrastive_text_embeddings(m, labels, true, cache);
  const auto pictures = contrastive_image_embeddings(m, images, true);
  const double scale = m.model.logit_scale();
  const auto B = static_cast<std::int64_t>(pictures.size()), L = static_cast<std::int64_t>(labels.size());
  std::vector<float> logits(static_cast<std::size_t>(B * L));
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t l = 0; l < L; ++l) {
      double dot = 0;
      const auto& p = pictures[static_cast<std::size_t>(b)];
      const auto& t = text[static_cast<std::size_t>(l)];
      for (std::size_t k = 0; k < p.size(); ++k) dot += static_cast<double>(p[k]) * t[k];
      logits[static_cast<std::size_t>(b * L + l)] = static_cast<float>(scale * dot);
    }
  return classifications(Tensor::from_floats(logits, {B, L}), labels);
}

}  // namespace tfm
