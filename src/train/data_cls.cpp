// Classifier data: a labelled TSV, a seeded test split, seeded epoch order, padded batches,
// and the classification scores.
#include <algorithm>
#include <map>
#include <numeric>

#include "tfm/error.h"
#include "train/text_reader.h"
#include "train/train_internal.h"

namespace tfm::train_detail {

std::vector<std::int64_t> seeded_permutation(std::int64_t n, std::uint64_t seed) {
  std::vector<std::int64_t> p(static_cast<std::size_t>(n));
  std::iota(p.begin(), p.end(), std::int64_t{0});
  std::uint64_t state = mix64(seed);
  for (std::int64_t i = n - 1; i > 0; --i) {  // Fisher-Yates
    state = mix64(state);
    std::swap(p[static_cast<std::size_t>(i)], p[static_cast<std::size_t>(state % static_cast<std::uint64_t>(i + 1))]);
  }
  return p;
}

LabeledText read_labeled_tsv(const std::string& path, bool header, const std::vector<std::string>& known_labels) {
  TextReader in(path);
  std::string line;
  struct Row {
    std::string label, text;
    std::int64_t line;
  };
  std::vector<Row> rows;
  while (in.next_line(line)) {
    const std::int64_t lineno = in.line_number();
    if (lineno == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);  // UTF-8 byte-order mark
    if ((header && lineno == 1) || line.empty()) continue;
    const auto tab = line.find('\t');
    TFM_CHECK(tab != std::string::npos && tab > 0, path + ":" + std::to_string(lineno), "expected label<TAB>text, got '",
              line.substr(0, 60), "'");
    rows.push_back({line.substr(0, tab), line.substr(tab + 1), lineno});
  }
  LabeledText out;
  std::map<std::string, std::int64_t> ids;
  if (known_labels.empty()) {
    for (const auto& r : rows) ids.emplace(r.label, 0);
  } else {
    for (const auto& l : known_labels) ids.emplace(l, 0);
  }
  if (known_labels.empty()) {
    for (auto& [name, id] : ids) {
      id = static_cast<std::int64_t>(out.label_names.size());
      out.label_names.push_back(name);
    }
  } else {
    out.label_names = known_labels;
    for (std::size_t i = 0; i < known_labels.size(); ++i) ids[known_labels[i]] = static_cast<std::int64_t>(i);
  }
  for (auto& r : rows) {
    const auto it = ids.find(r.label);
    if (it == ids.end()) {
      std::string list;
      for (const auto& l : known_labels) list += (list.empty() ? "" : ", ") + l;
      fail(path + ":" + std::to_string(r.line), "label '", r.label, "' is not one of the model's labels (", list, ")");
    }
    out.labels.push_back(it->second);
    out.texts.push_back(std::move(r.text));
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> read_pairs_tsv(const std::string& path, bool header) {
  TextReader in(path);
  std::string line;
  std::vector<std::pair<std::string, std::string>> pairs;
  while (in.next_line(line)) {
    const std::int64_t lineno = in.line_number();
    if (lineno == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);  // UTF-8 byte-order mark
    if ((header && lineno == 1) || line.empty()) continue;
    const auto t1 = line.find('\t');
    TFM_CHECK(t1 != std::string::npos, path + ":" + std::to_string(lineno), "expected source<TAB>target, got '",
              line.substr(0, 60), "'");
    const auto t2 = line.find('\t', t1 + 1);
    pairs.emplace_back(line.substr(0, t1), line.substr(t1 + 1, t2 == std::string::npos ? std::string::npos : t2 - t1 - 1));
  }
  return pairs;
}

ClsData::ClsData(std::vector<ClsExample> train, std::vector<ClsExample> test, std::uint64_t seed, std::int32_t pad_id)
    : train_(std::move(train)), test_(std::move(test)), seed_(seed), pad_(pad_id) {}

void ClsData::pack(const std::vector<const ClsExample*>& ex, Tensor& ids, Tensor& lens, Tensor& labels) const {
  const auto B = static_cast<std::int64_t>(ex.size());
  std::int64_t T = 1;
  for (const auto* e : ex) T = std::max<std::int64_t>(T, static_cast<std::int64_t>(e->ids.size()));
  ids = Tensor::empty({B, T}, DType::i64);
  lens = Tensor::empty({B}, DType::i64);
  labels = Tensor::empty({B}, DType::i64);
  auto* id = ids.data<std::int64_t>();
  for (std::int64_t b = 0; b < B; ++b) {
    const auto& e = *ex[static_cast<std::size_t>(b)];
    const auto n = static_cast<std::int64_t>(e.ids.size());
    for (std::int64_t t = 0; t < T; ++t) id[b * T + t] = t < n ? e.ids[static_cast<std::size_t>(t)] : pad_;
    lens.data<std::int64_t>()[b] = n;
    labels.data<std::int64_t>()[b] = e.label;
  }
}

void ClsData::train_batch(std::int64_t cursor, std::int64_t batch, Tensor& ids, Tensor& lens, Tensor& labels) {
  std::vector<const ClsExample*> ex;
  const std::int64_t n = train_size();
  for (std::int64_t b = 0; b < batch; ++b) {
    const std::int64_t c = cursor + b, epoch = c / n;
    if (epoch != cached_epoch_) {
      order_ = seeded_permutation(n, seed_ ^ mix64(static_cast<std::uint64_t>(epoch) + 1));
      cached_epoch_ = epoch;
    }
    ex.push_back(&train_[static_cast<std::size_t>(order_[static_cast<std::size_t>(c % n)])]);
  }
  pack(ex, ids, lens, labels);
}

void ClsData::test_batch(std::int64_t first, std::int64_t batch, Tensor& ids, Tensor& lens, Tensor& labels) const {
  std::vector<const ClsExample*> ex;
  for (std::int64_t b = first; b < std::min(first + batch, test_size()); ++b) ex.push_back(&test_[static_cast<std::size_t>(b)]);
  pack(ex, ids, lens, labels);
}

ClassScores class_scores(const std::vector<std::int64_t>& predicted, const std::vector<std::int64_t>& truth,
                         std::int64_t positive) {
  TFM_CHECK(predicted.size() == truth.size(), "scores", predicted.size(), " predictions for ", truth.size(), " labels");
  double tp = 0, fp = 0, fn = 0, correct = 0;
  for (std::size_t i = 0; i < truth.size(); ++i) {
    correct += predicted[i] == truth[i];
    tp += predicted[i] == positive && truth[i] == positive;
    fp += predicted[i] == positive && truth[i] != positive;
    fn += predicted[i] != positive && truth[i] == positive;
  }
  ClassScores s;
  s.accuracy = truth.empty() ? 0 : correct / static_cast<double>(truth.size());
  s.precision = tp + fp > 0 ? tp / (tp + fp) : 0;
  s.recall = tp + fn > 0 ? tp / (tp + fn) : 0;
  s.f1 = s.precision + s.recall > 0 ? 2 * s.precision * s.recall / (s.precision + s.recall) : 0;
  return s;
}

}  // namespace tfm::train_detail
