// Fusion-in-Decoder's passages for a seq2seq task (TrainConfig::fusion): the index of passages
// built once into the model directory, every example's k nearest passages found there, and each
// joined with the example's source into one encoder part.
#include <algorithm>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "dist/comm.h"
#include "tfm/chat_template.h"
#include "tfm/error.h"
#include "tfm/load.h"
#include "tfm/retrieval.h"
#include "train/task.h"

namespace tfm::train_detail {

namespace fs = std::filesystem;

std::string resolve_beside_config(const TrainConfig& cfg, const std::string& path, const std::string& key) {
  if (fs::exists(path)) return path;
  const fs::path beside = fs::path(cfg.source).parent_path() / path;
  if (fs::exists(beside)) return beside.lexically_normal().string();
  fail(cfg.source, key, ": '", path, "' not found (tried '", (fs::current_path() / path).lexically_normal().string(), "' and '",
       beside.lexically_normal().string(), "', beside the config)");
}

namespace {

// The training pairs as a translation memory: passage i is training pair i.
std::vector<Passage> memory_passages(const TrainConfig::FusionConfig& fc, const std::vector<std::pair<std::string, std::string>>& pairs) {
  std::vector<Passage> out;
  for (std::size_t i = 0; i < pairs.size(); ++i)
    out.push_back({std::to_string(i), render_chat_template(fc.passage_template, {{"source", pairs[i].first}, {"target", pairs[i].second}})});
  return out;
}

// Each example's parts: its source joined with each of its k nearest passages (never the
// passage whose id is `own(i)`), tokenized as the sources are (pair_side).
void fill_parts(const TrainConfig& cfg, const Tokenizer& tok, const PassageIndex& index, LoadedModel& encoder,
                std::vector<PairExample>& examples, const std::vector<std::pair<std::string, std::string>>& texts, bool exclude_own) {
  const TrainConfig::FusionConfig& fc = *cfg.fusion;
  TFM_CHECK(examples.size() == texts.size(), "data.fusion", "internal: ", examples.size(), " examples for ", texts.size(), " texts");
  const std::int64_t want = fc.k + (exclude_own ? 1 : 0);
  TFM_CHECK(index.size() >= want, cfg.source, "data.fusion.k ", fc.k, " needs ", want, " passages; the index holds ", index.size());
  constexpr std::size_t kBatch = 256;
  for (std::size_t first = 0; first < texts.size(); first += kBatch) {
    const std::size_t last = std::min(texts.size(), first + kBatch);
    std::vector<std::string> queries;
    for (std::size_t i = first; i < last; ++i) queries.push_back(texts[i].first);
    const auto hits = index.search(encoder, queries, want);
    for (std::size_t i = first; i < last; ++i) {
      PairExample& e = examples[i];
      e.parts.clear();
      for (const SearchHit& h : hits[i - first]) {
        if (static_cast<std::int64_t>(e.parts.size()) == fc.k) break;
        if (h.index < 0 || (exclude_own && h.id == std::to_string(i))) continue;
        e.parts.push_back(pair_side(cfg, tok, fusion_part(texts[i].first, h, fc.part_template)));
      }
      TFM_CHECK(static_cast<std::int64_t>(e.parts.size()) == fc.k, cfg.source, "data.fusion: example ", i, " found ", e.parts.size(),
                " of its ", fc.k, " passages");
    }
  }
}

}  // namespace

std::int64_t attach_fusion(const TrainConfig& cfg, TaskData& d, const Tokenizer& tok, const std::string& index_dir, bool training) {
  TFM_CHECK(cfg.fusion && d.s2s, cfg.source, "data.fusion applies to task \"seq2seq\" only");
  const TrainConfig::FusionConfig& fc = *cfg.fusion;
  const std::string encoder_path = resolve_beside_config(cfg, fc.encoder, "data.fusion.encoder");
  LoadedModel encoder = load_model(encoder_path);
  const bool memory = fc.passages.empty();  // the training pairs themselves
  if (dist::rank() == 0 && !PassageIndex::complete(index_dir)) {  // none yet, or a build to resume
    const std::vector<Passage> passages = memory ? memory_passages(fc, d.train_pairs)
                                                 : read_passages(resolve_beside_config(cfg, fc.passages, "data.fusion.passages"));
    fs::create_directories(index_dir);
    build_index(encoder, fs::absolute(encoder_path).lexically_normal().string(), passages, index_dir, IndexBuildOptions{});
  }
  if (dist::size() > 1) dist::barrier();  // the other ranks read what rank 0 built
  const PassageIndex index = PassageIndex::open(index_dir);
  index.check_encoder(encoder);
  if (training) fill_parts(cfg, tok, index, encoder, d.s2s->train_examples(), d.train_pairs, memory);
  fill_parts(cfg, tok, index, encoder, d.s2s->test_examples(), d.test_pairs, false);
  d.s2s->set_fused_parts(fc.k);
  return index.size();
}

}  // namespace tfm::train_detail
