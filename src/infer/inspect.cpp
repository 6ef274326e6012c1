// Texts -> model inputs as training fed them; classify and embed over one padded batch.
#include <algorithm>
#include <cmath>

#include "infer/inspect_util.h"
#include "metrics/text.h"
#include "tfm/autograd.h"
#include "tfm/error.h"
#include "tfm/inspect.h"

#include "tfm/contrastive.h"
#include "tfm/ops.h"

namespace tfm {

std::vector<std::int32_t> input_ids_for(const LoadedModel& m, std::string_view text) {
  const ModelConfig& c = m.config;
  const Tokenizer& tok = m.tokenizer;
  std::vector<std::int32_t> ids;
  if (c.architecture == Architecture::encoder_only && tok.bos_id() >= 0) ids.push_back(tok.bos_id());
  for (std::int32_t id : tok.encode(text)) ids.push_back(id);
  if (c.architecture == Architecture::encoder_decoder && tok.eos_id() >= 0) ids.push_back(tok.eos_id());
  if (static_cast<std::int64_t>(ids.size()) > c.max_positions) {
    ids.resize(static_cast<std::size_t>(c.max_positions));  // as training truncates (to max_length)
    if (c.architecture == Architecture::encoder_decoder && tok.eos_id() >= 0) ids.back() = tok.eos_id();
  }
  return ids;
}

std::vector<std::int32_t> decoder_ids_for(const LoadedModel& m, std::string_view text) {
  TFM_CHECK(m.config.architecture == Architecture::encoder_decoder, "decoder input", "only encoder-decoder models take a target text");
  const std::int32_t start = m.tokenizer.bos_id() >= 0 ? m.tokenizer.bos_id() : static_cast<std::int32_t>(m.config.decoder_start_token_id);
  std::vector<std::int32_t> ids{start};
  for (std::int32_t id : m.tokenizer.encode(text)) ids.push_back(id);
  if (static_cast<std::int64_t>(ids.size()) > m.config.max_positions) ids.resize(static_cast<std::size_t>(m.config.max_positions));
  return ids;
}

namespace inspect_detail {

PaddedIds pad_batch(const LoadedModel& m, const std::vector<std::vector<std::int32_t>>& seqs) {
  const std::int32_t pad = m.tokenizer.pad_id() >= 0 ? m.tokenizer.pad_id() : std::max<std::int32_t>(0, static_cast<std::int32_t>(m.config.pad_token_id));
  const auto B = static_cast<std::int64_t>(seqs.size());
  std::int64_t T = 1;
  for (const auto& s : seqs) T = std::max<std::int64_t>(T, static_cast<std::int64_t>(s.size()));
  std::vector<std::int64_t> ids(static_cast<std::size_t>(B * T), pad), lens(static_cast<std::size_t>(B));
  for (std::int64_t b = 0; b < B; ++b) {
    const auto& s = seqs[static_cast<std::size_t>(b)];
    std::copy(s.begin(), s.end(), ids.begin() + b * T);
    lens[static_cast<std::size_t>(b)] = static_cast<std::int64_t>(s.size());
  }
  return {Tensor::from_ints(ids, {B, T}), Tensor::from_ints(lens, {B})};
}

std::vector<std::vector<std::int32_t>> inputs_of(const LoadedModel& m, const std::vector<std::string>& texts) {
  std::vector<std::vector<std::int32_t>> seqs;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    seqs.push_back(input_ids_for(m, texts[i]));
    TFM_CHECK(!seqs.back().empty(), "input", "an empty text gives no tokens: a decoder-only model needs at least one");
  }
  return seqs;
}

}  // namespace inspect_detail

using namespace inspect_detail;

namespace {
// The padded (B, L) batch of texts with valid lengths, the model switched to evaluation.
ModelInputs eval_inputs(LoadedModel& m, const std::vector<std::string>& texts) {
  m.model.set_training(false);
  const PaddedIds p = pad_batch(m, inputs_of(m, texts));
  ModelInputs in;
  in.input_ids = p.ids;
  in.valid_lens = p.lens;
  return in;
}
}  // namespace

namespace {

void check_classifier(const ModelConfig& c) {
  TFM_CHECK(c.head == HeadKind::classifier, "classify", "the model's head is '", to_string(c.head),
            "'; classify needs a classifier head");
  TFM_CHECK(c.architecture != Architecture::encoder_decoder, "classify", "encoder-decoder classifiers are not supported");
}

std::vector<Classification> classifications(const ModelConfig& c, const Tensor& logits) {
  return inspect_detail::classifications(logits, c.id2label);
}

}  // namespace

namespace inspect_detail {

std::vector<Classification> classifications(const Tensor& logits_tensor, const std::vector<std::string>& names) {
  const std::vector<float> logits = contiguous(logits_tensor).to_floats();
  const auto L = static_cast<std::size_t>(logits_tensor.size(logits_tensor.dim() - 1));
  std::vector<Classification> out;
  for (std::size_t b = 0; b < logits.size() / L; ++b) {
    const float* row = logits.data() + b * L;
    const double mx = *std::max_element(row, row + L);
    double z = 0;
    for (std::size_t j = 0; j < L; ++j) z += std::exp(static_cast<double>(row[j]) - mx);
    Classification r;
    for (std::size_t j = 0; j < L; ++j) r.probabilities.push_back(static_cast<float>(std::exp(static_cast<double>(row[j]) - mx) / z));
    r.label = std::max_element(r.probabilities.begin(), r.probabilities.end()) - r.probabilities.begin();
    r.probability = r.probabilities[static_cast<std::size_t>(r.label)];
    r.name = static_cast<std::size_t>(r.label) < names.size() ? names[static_cast<std::size_t>(r.label)] : std::to_string(r.label);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

std::string label_name(const ModelConfig& c, std::int64_t label) {
  return label >= 0 && static_cast<std::size_t>(label) < c.id2label.size() ? c.id2label[static_cast<std::size_t>(label)]
                                                                          : std::to_string(label);
}

std::vector<Classification> classify(LoadedModel& m, const std::vector<std::string>& texts) {
  check_classifier(m.config);
  TFM_CHECK(!m.config.reads_images(), "classify", "this is an image model: give it images (--image)");
  if (texts.empty()) return {};
  NoGradGuard no_grad;
  const ModelInputs in = eval_inputs(m, texts);
  return classifications(m.config, m.model.forward(in).logits);
}

Tensor pixel_values_for(const LoadedModel& m, const std::vector<Image>& images) {
  const ModelConfig& c = m.config;
  TFM_CHECK(c.reads_images(), "images", "the model reads text, not images");
  TFM_CHECK(m.image_processor.has_value(), "images", "the model directory has no preprocessor_config.json: it does not "
            "say how images are resized and normalised");
  const auto B = static_cast<std::int64_t>(images.size());
  Tensor px = Tensor::empty({B, 3, c.image_size, c.image_size});
  for (std::int64_t b = 0; b < B; ++b) {
    const Image x = m.image_processor->prepare(images[static_cast<std::size_t>(b)]);
    TFM_CHECK(x.width == c.image_size && x.height == c.image_size && c.num_channels == 3, "images",
              "preprocessor_config.json gives ", x.width, "x", x.height, " images; the model reads ", c.num_channels,
              " x ", c.image_size, " x ", c.image_size);
    m.image_processor->to_pixels(x, px.data<float>() + b * 3 * c.image_size * c.image_size);
  }
  return px;
}

std::vector<Classification> classify_images(LoadedModel& m, const std::vector<Image>& images) {
  TFM_CHECK(!m.config.text_tower.enabled(), "classify",
            "a CLIP model classifies pictures against label texts: give them (--labels, or \"labels\" in a request)");
  check_classifier(m.config);
  if (images.empty()) return {};
  NoGradGuard no_grad;
  m.model.set_training(false);
  ModelInputs in;
  in.pixel_values = pixel_values_for(m, images);
  return classifications(m.config, m.model.forward(in).logits);
}

EmbedPooling embed_pooling_from_name(const std::string& name) {
  if (name == "auto") return EmbedPooling::automatic;
  if (name == "mean") return EmbedPooling::mean;
  if (name == "first") return EmbedPooling::first;
  if (name == "last") return EmbedPooling::last;
  fail("embed", "unknown pooling '", name, "' (allowed: auto, mean, first, last)");
}

namespace {

EmbedPooling resolve_pooling(const ModelConfig& c, EmbedPooling pooling) {
  if (pooling != EmbedPooling::automatic) return pooling;
  return c.architecture == Architecture::encoder_only && c.pooling == Pooling::first ? EmbedPooling::first : EmbedPooling::mean;
}

// One vector per row of hidden (B, T, C): its first, last (of lens[b]) or mean state; the
// mean starts at position `from` (an image model's patches, after [CLS] and distillation).
std::vector<std::vector<float>> pool_rows(const Tensor& hidden_tensor, const std::vector<std::int64_t>& lens,
                                          EmbedPooling pooling, bool normalize, std::int64_t from = 0) {
  const Tensor hidden = contiguous(hidden_tensor);
  const std::int64_t T = hidden.size(1), C = hidden.size(2);
  const std::vector<float> h = hidden.to_floats();
  std::vector<std::vector<float>> out;
  for (std::size_t b = 0; b < lens.size(); ++b) {
    const std::int64_t n = lens[b];
    std::vector<double> acc(static_cast<std::size_t>(C), 0.0);
    auto add_row = [&](std::int64_t t) {
      const float* r = h.data() + (static_cast<std::int64_t>(b) * T + t) * C;
      for (std::int64_t k = 0; k < C; ++k) acc[static_cast<std::size_t>(k)] += r[k];
    };
    if (pooling == EmbedPooling::first) add_row(0);
    else if (pooling == EmbedPooling::last) add_row(n - 1);
    else {
      for (std::int64_t t = from; t < n; ++t) add_row(t);
      for (double& v : acc) v /= static_cast<double>(n - from);
    }
    double norm = 0;
    for (double v : acc) norm += v * v;
    norm = std::sqrt(norm);
    std::vector<float> e;
    for (double v : acc) e.push_back(static_cast<float>(normalize && norm > 0 ? v / norm : v));
    out.push_back(std::move(e));
  }
  return out;
}

}  // namespace

namespace {

// A text as sentence-transformers' Transformer module feeds it: lower-cased when the directory
// says so, the tokenizer's special tokens around it, the content cut to max_len with the
// specials kept (the tokenizer's truncation=True).
std::vector<std::int32_t> sentence_ids(const LoadedModel& m, const std::string& text, std::size_t max_len) {
  const std::string s = m.sentence->do_lower_case ? metrics::detail::encode_utf8(metrics::detail::py_lower(
                                                        metrics::detail::decode_utf8(text)))
                                                  : text;
  const Encoding e = m.tokenizer.encode_full(s, true);
  std::size_t n = e.ids.size();
  while (n > 0 && !e.attention_mask.empty() && e.attention_mask[n - 1] == 0) --n;  // the file's own padding
  std::size_t head = 0, tail = 0;
  while (head < n && e.special_tokens_mask[head]) ++head;
  while (tail < n - head && e.special_tokens_mask[n - 1 - tail]) ++tail;
  std::vector<std::int32_t> ids(e.ids.begin(), e.ids.begin() + static_cast<std::ptrdiff_t>(n));
  if (n > max_len) {
    const std::size_t keep = max_len > head + tail ? max_len - head - tail : 0;
    ids.assign(e.ids.begin(), e.ids.begin() + static_cast<std::ptrdiff_t>(head + keep));
    ids.insert(ids.end(), e.ids.begin() + static_cast<std::ptrdiff_t>(n - tail), e.ids.begin() + static_cast<std::ptrdiff_t>(n));
    ids.resize(std::min(ids.size(), max_len));
  }
  return ids;
}

std::string prompt_text(const SentencePipeline* sp, const EmbedOptions& o) {
  TFM_CHECK(o.prompt.empty() || o.prompt_name.empty(), "embed", "give a prompt or a prompt name, not both");
  if (!o.prompt.empty()) return o.prompt;
  const std::string name = !o.prompt_name.empty() ? o.prompt_name : sp ? sp->default_prompt_name : "";
  if (name.empty()) return "";
  TFM_CHECK(sp, "embed", "prompt name '", name, "': the model has no config_sentence_transformers.json prompts");
  const auto it = sp->prompts.find(name);
  if (it == sp->prompts.end()) {
    std::string known;
    for (const auto& [k, v] : sp->prompts) known += (known.empty() ? "" : ", ") + k;
    fail("embed", "prompt name '", name, "' is not among the model's prompts (", known.empty() ? "none" : known, ")");
  }
  return it->second;
}

Tensor last_hidden(LoadedModel& m, const ModelInputs& in) {
  return m.config.architecture == Architecture::decoder_only ? m.model.decode(in, Tensor()) : m.model.encode(in);
}

}  // namespace

std::vector<std::vector<float>> embed(LoadedModel& m, const std::vector<std::string>& texts, const EmbedOptions& o) {
  const ModelConfig& c = m.config;
  if (c.text_tower.enabled()) {  // CLIP: the text tower's embedding in the shared space
    TFM_CHECK(o.dimensions >= 0, "dimensions", "must be positive");
    TFM_CHECK(o.prompt.empty() && o.prompt_name.empty(), "embed", "a CLIP model takes no prompt");
    auto vecs = contrastive_text_embeddings(m, texts, o.normalize);
    truncate_embeddings(vecs, o.dimensions, o.normalize);
    return vecs;
  }
  TFM_CHECK(!c.reads_images(), "embed", "this is an image model: give it images (--image)");
  TFM_CHECK(o.dimensions >= 0, "dimensions", "must be positive");
  const SentencePipeline* sp = m.sentence && o.pooling == EmbedPooling::automatic ? &*m.sentence : nullptr;
  const std::string prompt = prompt_text(m.sentence ? &*m.sentence : nullptr, o);
  if (texts.empty()) return {};
  NoGradGuard no_grad;
  std::vector<std::vector<float>> vecs;
  if (sp == nullptr) {
    std::vector<std::string> prompted = texts;
    for (std::string& t : prompted) t = prompt + t;
    const ModelInputs in = eval_inputs(m, prompted);
    vecs = pool_rows(last_hidden(m, in), in.valid_lens.to_ints(), resolve_pooling(c, o.pooling), o.normalize);
  } else {
    m.model.set_training(false);
    const auto max_len = static_cast<std::size_t>(sp->max_seq_length > 0 ? std::min(sp->max_seq_length, c.max_positions)
                                                                          : c.max_positions);
    std::vector<std::vector<std::int32_t>> seqs;
    for (const std::string& t : texts) {
      seqs.push_back(sentence_ids(m, prompt + t, max_len));
      TFM_CHECK(!seqs.back().empty(), "input", "an empty text gives no tokens");
    }
    // sentence-transformers leaves out the prompt's tokens but its last (the [SEP] it ends with).
    const std::int64_t skip = prompt.empty() ? 0 : static_cast<std::int64_t>(sentence_ids(m, prompt, max_len).size()) - 1;
    const PaddedIds p = pad_batch(m, seqs);
    ModelInputs in;
    in.input_ids = p.ids;
    in.valid_lens = p.lens;
    const Tensor hidden = contiguous(last_hidden(m, in));
    vecs = sp->apply(hidden.to_floats(), hidden.size(1), hidden.size(2), p.lens.to_ints(),
                     std::vector<std::int64_t>(texts.size(), skip));
    if (o.normalize && !sp->normalize) normalize_embeddings(vecs);
  }
  truncate_embeddings(vecs, o.dimensions, o.normalize || (sp && sp->normalize));
  return vecs;
}

std::vector<std::vector<float>> embed(LoadedModel& m, const std::vector<std::string>& texts, EmbedPooling pooling,
                                      bool normalize) {
  EmbedOptions o;
  o.pooling = pooling;
  o.normalize = normalize;
  return embed(m, texts, o);
}

std::vector<RerankResult> rerank(LoadedModel& m, const std::string& query, const std::vector<std::string>& documents) {
  check_classifier(m.config);
  TFM_CHECK(!m.config.reads_images(), "rerank", "this is an image model");
  if (documents.empty()) return {};
  NoGradGuard no_grad;
  m.model.set_training(false);
  const auto max_len = static_cast<std::size_t>(m.config.max_positions);
  std::vector<std::vector<std::int32_t>> seqs;
  std::vector<std::vector<std::int64_t>> types;
  for (const std::string& d : documents) {
    Encoding e = m.tokenizer.encode_pair(query, d, true);
    if (e.ids.size() > max_len) {
      // The document is the last run of ordinary tokens: drop the excess from its end.
      std::size_t excess = e.ids.size() - max_len, end = e.ids.size();
      while (end > 0 && e.special_tokens_mask[end - 1]) --end;
      std::size_t start = end;
      while (start > 0 && !e.special_tokens_mask[start - 1] && end - start < excess) --start;
      TFM_CHECK(end - start == excess, "rerank", "the query alone is longer than the model's ", max_len, " positions");
      for (auto* v : {&e.ids, &e.type_ids}) v->erase(v->begin() + static_cast<std::ptrdiff_t>(start), v->begin() + static_cast<std::ptrdiff_t>(end));
      e.special_tokens_mask.erase(e.special_tokens_mask.begin() + static_cast<std::ptrdiff_t>(start),
                                  e.special_tokens_mask.begin() + static_cast<std::ptrdiff_t>(end));
    }
    seqs.push_back(e.ids);
    types.emplace_back(e.type_ids.begin(), e.type_ids.end());
  }
  const PaddedIds p = pad_batch(m, seqs);
  const std::int64_t B = p.ids.size(0), T = p.ids.size(1);
  std::vector<std::int64_t> tt(static_cast<std::size_t>(B * T), 0);
  for (std::int64_t b = 0; b < B; ++b)
    std::copy(types[static_cast<std::size_t>(b)].begin(), types[static_cast<std::size_t>(b)].end(), tt.begin() + b * T);
  ModelInputs in;
  in.input_ids = p.ids;
  in.valid_lens = p.lens;
  in.token_type_ids = Tensor::from_ints(tt, {B, T});
  const Tensor logits = m.model.forward(in).logits;  // (B, L)
  const std::vector<float> raw = contiguous(logits).to_floats();
  const std::vector<Classification> classes = classifications(m.config, logits);  // softmax over the labels
  const auto L = static_cast<std::size_t>(m.config.num_labels);
  std::vector<RerankResult> out;
  for (std::size_t b = 0; b < documents.size(); ++b) {
    RerankResult r;
    r.index = static_cast<std::int64_t>(b);
    r.logit = raw[b * L + L - 1];
    r.relevance = L == 1 ? static_cast<float>(1 / (1 + std::exp(-static_cast<double>(r.logit))))
                         : classes[b].probabilities[L - 1];
    out.push_back(r);
  }
  std::stable_sort(out.begin(), out.end(), [](const RerankResult& a, const RerankResult& b) { return a.relevance > b.relevance; });
  return out;
}

std::vector<std::vector<float>> embed_images(LoadedModel& m, const std::vector<Image>& images, EmbedPooling pooling,
                                             bool normalize) {
  if (m.config.text_tower.enabled()) return contrastive_image_embeddings(m, images, normalize);  // CLIP's shared space
  if (images.empty()) return {};
  NoGradGuard no_grad;
  m.model.set_training(false);
  ModelInputs in;
  in.pixel_values = pixel_values_for(m, images);
  const Tensor hidden = m.model.encode(in);  // (B, prefix + patches, C) after the final norm
  return pool_rows(hidden, std::vector<std::int64_t>(images.size(), hidden.size(1)), resolve_pooling(m.config, pooling),
                   normalize, m.config.prefix_tokens());
}

}  // namespace tfm
