// Task-specific setup, loss and evaluation for the LM and classifier tasks.
#include "train/task.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "tfm/autograd.h"
#include "tfm/contrastive.h"
#include "tfm/error.h"
#include "tfm/metrics.h"
#include "tfm/ops.h"
#include "tfm/session.h"
#include "tfm/transcribe.h"
#include "train/distill.h"
#include "train/text_reader.h"

namespace tfm::train_detail {
namespace {

using json = nlohmann::json;

Tokenizer train_tokenizer(const TrainConfig& cfg, const std::vector<std::string>& corpus) {
  TokenizerTrainOptions to;
  to.kind = tokenizer_kind_from_name(cfg.tokenizer_kind);
  to.vocab_size = cfg.tokenizer_vocab_size;
  to.min_freq = cfg.tokenizer_min_freq;
  to.isolate_cjk = cfg.tokenizer_isolate_cjk;
  return Tokenizer::train(corpus, to);
}

// The LM stream is never held as text: the tokenizer (when trained) sees the first
// kTokenizerSampleBytes of the training part, then the file is encoded piece by piece (pieces
// end after a newline or at a UTF-8 boundary) into a compact TokenStore, and the last
// val_fraction of the tokens is held out.
constexpr std::uint64_t kTokenizerSampleBytes = std::uint64_t{64} << 20;

TaskData lm_data(const TrainConfig& cfg, std::optional<Tokenizer>& tok) {
  std::string piece;
  if (!tok) {  // the tokenizer sees the training part only (the held-out tail is cut by bytes here)
    TextReader in(cfg.train_file);
    const auto cut = std::min<std::uint64_t>(
        static_cast<std::uint64_t>(static_cast<double>(in.file_bytes()) * (1.0 - cfg.val_fraction)), kTokenizerSampleBytes);
    std::string sample;
    while (sample.size() < cut && in.next_piece(piece)) sample += piece;
    sample.resize(std::min<std::size_t>(sample.size(), cut));
    tok = train_tokenizer(cfg, {sample});
  }
  TokenStore ids(tok->vocab_size());
  TextReader in(cfg.train_file);
  while (in.next_piece(piece)) ids.append(tok->encode(piece));
  const auto n_val = static_cast<std::int64_t>(static_cast<double>(ids.size()) * cfg.val_fraction);
  TokenStore val = ids.slice(ids.size() - n_val, ids.size());
  ids.truncate(ids.size() - n_val);
  TaskData d;
  d.lm.emplace(std::move(ids), std::move(val), cfg.block_size, cfg.seed);
  TFM_CHECK(d.lm->sequences_per_epoch() >= cfg.batch_size, cfg.source, "the training split holds ",
            d.lm->sequences_per_epoch(), " sequences of block_size+1 tokens: too few for one batch of ", cfg.batch_size);
  TFM_CHECK(d.lm->val_sequences() >= 1, cfg.source, "the held-out split is shorter than one sequence of ",
            cfg.block_size + 1, " tokens; raise data.val_fraction");
  return d;
}

// <bos> + the text's tokens, truncated to max_length.
ClsExample cls_example(const TrainConfig& cfg, const Tokenizer& tok, const std::string& text, std::int64_t label) {
  std::vector<std::int32_t> ids{tok.bos_id()};
  for (std::int32_t id : tok.encode(text)) {
    if (static_cast<std::int64_t>(ids.size()) >= cfg.max_length) break;
    ids.push_back(id);
  }
  return ClsExample{std::move(ids), label};
}

}  // namespace

// The text's tokens truncated to max_length - 1, then <eos>.
std::vector<std::int32_t> pair_side(const TrainConfig& cfg, const Tokenizer& tok, const std::string& s) {
  std::vector<std::int32_t> ids = tok.encode(s);
  if (static_cast<std::int64_t>(ids.size()) >= cfg.max_length) ids.resize(static_cast<std::size_t>(cfg.max_length - 1));
  ids.push_back(tok.eos_id());
  return ids;
}

namespace {

// The class whose precision/recall/F1 are reported: data.positive_label, else the last.
std::int64_t positive_class(const TrainConfig& cfg, const std::vector<std::string>& names) {
  if (cfg.positive_label.empty()) return static_cast<std::int64_t>(names.size()) - 1;
  const auto it = std::find(names.begin(), names.end(), cfg.positive_label);
  TFM_CHECK(it != names.end(), cfg.source, "data.positive_label '", cfg.positive_label, "' is not a label of ",
            cfg.train_file);
  return it - names.begin();
}

TaskData cls_data(const TrainConfig& cfg, std::optional<Tokenizer>& tok) {
  LabeledText lt = read_labeled_tsv(cfg.train_file, cfg.header, cfg.labels);
  const auto n = static_cast<std::int64_t>(lt.texts.size());
  TFM_CHECK(lt.label_names.size() >= 2, cfg.train_file, "needs at least two labels, found ", lt.label_names.size());
  const auto n_test = static_cast<std::int64_t>(static_cast<double>(n) * cfg.test_fraction);
  const auto perm = seeded_permutation(n, cfg.seed ^ 0x7e57ull);  // the test split: first n_test of perm
  std::vector<std::string> train_texts;
  for (std::int64_t i = n_test; i < n; ++i) train_texts.push_back(lt.texts[static_cast<std::size_t>(perm[static_cast<std::size_t>(i)])]);
  if (!tok) tok = train_tokenizer(cfg, train_texts);
  TFM_CHECK(tok->bos_id() >= 0 && tok->pad_id() >= 0, "classifier", "the tokenizer needs <bos> and <pad> tokens");
  auto example = [&](std::int64_t i) {
    return cls_example(cfg, *tok, lt.texts[static_cast<std::size_t>(i)], lt.labels[static_cast<std::size_t>(i)]);
  };
  std::vector<ClsExample> train, test;
  for (std::int64_t i = 0; i < n; ++i) (i < n_test ? test : train).push_back(example(perm[static_cast<std::size_t>(i)]));
  TaskData d;
  d.kind = TaskKind::classifier;
  d.label_names = lt.label_names;
  d.positive = positive_class(cfg, lt.label_names);
  TFM_CHECK(static_cast<std::int64_t>(train.size()) >= cfg.batch_size && !test.empty(), cfg.source, "the training split holds ",
            train.size(), " examples: too few for one batch of ", cfg.batch_size);
  d.cls.emplace(std::move(train), std::move(test), cfg.seed, tok->pad_id());
  return d;
}

TaskData s2s_data(const TrainConfig& cfg, std::optional<Tokenizer>& tok) {
  const auto pairs = read_pairs_tsv(cfg.train_file, cfg.header);
  const auto n = static_cast<std::int64_t>(pairs.size());
  const std::int64_t n_test = cfg.test_size > 0 ? cfg.test_size : static_cast<std::int64_t>(static_cast<double>(n) * cfg.test_fraction);
  TFM_CHECK(n_test >= 1 && n_test < n, cfg.source, "data.test_size ", n_test, " leaves no training pairs of ", n);
  const auto perm = seeded_permutation(n, cfg.seed ^ 0x7e57ull);  // the test split: first n_test of perm
  if (!tok) {
    std::vector<std::string> corpus;
    for (std::int64_t i = n_test; i < n; ++i) {
      const auto& p = pairs[static_cast<std::size_t>(perm[static_cast<std::size_t>(i)])];
      corpus.push_back(p.first);
      corpus.push_back(p.second);
    }
    tok = train_tokenizer(cfg, corpus);
  }
  TFM_CHECK(tok->bos_id() >= 0 && tok->eos_id() >= 0 && tok->pad_id() >= 0, "seq2seq",
            "the tokenizer needs <bos>, <eos> and <pad> tokens");
  auto encode = [&](const std::string& s) { return pair_side(cfg, *tok, s); };
  TaskData d;
  d.kind = TaskKind::seq2seq;
  std::vector<PairExample> train, test;
  for (std::int64_t i = 0; i < n; ++i) {
    const auto& p = pairs[static_cast<std::size_t>(perm[static_cast<std::size_t>(i)])];
    (i < n_test ? test : train).push_back({encode(p.first), encode(p.second), {}});
    if (i < n_test) d.test_refs.push_back(p.second);
    if (cfg.fusion) (i < n_test ? d.test_pairs : d.train_pairs).push_back(p);
  }
  TFM_CHECK(static_cast<std::int64_t>(train.size()) >= cfg.batch_size, cfg.source, "the training split holds ",
            train.size(), " pairs: too few for one batch of ", cfg.batch_size);
  d.s2s.emplace(std::move(train), std::move(test), cfg.seed, tok->pad_id(), tok->bos_id(), cfg.batch_size);
  return d;
}

// IDX files (a labels file beside) or a folder of class folders. `classes` names the classes
// (IDX files number them; a folder's names must be these).
LabeledImages read_images(const std::string& images, const std::string& labels, const std::vector<std::string>& classes,
                          const std::string& key) {
  if (std::filesystem::is_directory(images)) {
    TFM_CHECK(labels.empty(), key + "_labels", "is for IDX image files; '", images, "' is a folder of class folders");
    return read_image_folder(images, classes);
  }
  TFM_CHECK(!labels.empty(), key, "'", images, "' is not a folder of class folders, so it is an IDX image file and needs \"",
            key.substr(key.rfind('.') + 1), "_labels\": its IDX label file");
  LabeledImages li = read_idx_images(images, labels);
  if (!classes.empty()) {
    TFM_CHECK(li.label_names.size() <= classes.size(), labels, "holds class ids up to ", li.label_names.size() - 1,
              " but data.labels names ", classes.size(), " classes");
    li.label_names = classes;
  }
  return li;
}

TaskData image_data(const TrainConfig& cfg) {
  const std::string where = cfg.source + ".data";
  LabeledImages train = read_images(cfg.train_file, cfg.train_labels_file, cfg.labels, where + ".train");
  LabeledImages test;
  if (!cfg.test_file.empty()) {
    test = read_images(cfg.test_file, cfg.test_labels_file, train.label_names, where + ".test");
  } else {  // a seeded split of the training images, as for text classifiers
    const auto n = static_cast<std::int64_t>(train.images.size());
    const std::int64_t n_test = cfg.test_size > 0 ? cfg.test_size : static_cast<std::int64_t>(static_cast<double>(n) * cfg.test_fraction);
    TFM_CHECK(n_test >= 1 && n_test < n, where, "a test split of ", n_test, " leaves no training images of ", n);
    const auto perm = seeded_permutation(n, cfg.seed ^ 0x7e57ull);
    LabeledImages kept;
    kept.label_names = test.label_names = train.label_names;
    for (std::int64_t i = 0; i < n; ++i) {
      const auto j = static_cast<std::size_t>(perm[static_cast<std::size_t>(i)]);
      LabeledImages& to = i < n_test ? test : kept;
      to.images.push_back(std::move(train.images[j]));
      to.labels.push_back(train.labels[j]);
    }
    train = std::move(kept);
  }
  // IDX labels number the classes; names come from data.labels, and the larger set of ids wins.
  if (test.label_names.size() > train.label_names.size()) train.label_names = test.label_names;
  TFM_CHECK(train.label_names.size() >= 2, where, "needs at least two classes, found ", train.label_names.size());
  TFM_CHECK(static_cast<std::int64_t>(train.images.size()) >= cfg.batch_size, cfg.source, "the training split holds ",
            train.images.size(), " images: too few for one batch of ", cfg.batch_size);
  TaskData d;
  d.kind = TaskKind::image_classifier;
  d.label_names = train.label_names;
  d.positive = positive_class(cfg, d.label_names);
  d.images.emplace(std::move(train), std::move(test), ImageProcessor::from_json(cfg.preprocessor_json, where + ".preprocessor"),
                   ImageAugment{cfg.augment_crop_padding, cfg.augment_horizontal_flip, cfg.augment_random_erasing}, cfg.seed);
  return d;
}

// ---- speech --------------------------------------------------------------------------------
// Whisper's special tokens after a BPE vocabulary trained on the transcripts (byte-level, so
// nothing is unknown), in Whisper's order: the end, start, task tokens, no-timestamps, then
// the 1501 timestamps <|0.00|> .. <|30.00|>.
Tokenizer speech_tokenizer(const TrainConfig& cfg, const std::vector<std::string>& transcripts) {
  TFM_CHECK(cfg.tokenizer_kind == "bpe", cfg.source + ".tokenizer", "task \"speech\" trains a \"bpe\" tokenizer (Whisper's kind), got \"",
            cfg.tokenizer_kind, "\"");
  TokenizerTrainOptions to;
  to.kind = TokenizerKind::bpe;
  to.vocab_size = cfg.tokenizer_vocab_size;
  to.min_freq = cfg.tokenizer_min_freq;
  to.reserved = {};
  json j = json::parse(Tokenizer::train(transcripts, to).to_json());
  std::int64_t id = 0;
  for (const auto& [piece, i] : j["model"]["vocab"].items()) id = std::max<std::int64_t>(id, i.get<std::int64_t>() + 1);
  for (const auto& a : j["added_tokens"]) id = std::max<std::int64_t>(id, a["id"].get<std::int64_t>() + 1);
  const auto add = [&](const std::string& s) {
    j["added_tokens"].push_back({{"id", id++}, {"content", s}, {"single_word", false}, {"lstrip", false}, {"rstrip", false},
                                 {"normalized", false}, {"special", true}});
  };
  for (const char* s : {"<|endoftext|>", "<|startoftranscript|>", "<|translate|>", "<|transcribe|>", "<|startoflm|>",
                        "<|startofprev|>", "<|nospeech|>", "<|notimestamps|>"})
    add(s);
  for (int i = 0; i <= 1500; ++i) {
    char buf[16];
    std::snprintf(buf, sizeof buf, "<|%.2f|>", i * 0.02);
    add(buf);
  }
  return Tokenizer::from_json(j.dump());
}

// The decoding rules of a speech model trained here (its generation_config.json says the same).
GenerationDefaults speech_generation(const Tokenizer& tok) {
  GenerationDefaults g;
  const auto id = [&](const char* s) { return static_cast<std::int64_t>(tok.token_to_id(s)); };
  g.decoder_start_token_id = id("<|startoftranscript|>");
  g.eos_token_ids = {id("<|endoftext|>")};
  g.pad_token_id = id("<|endoftext|>");
  g.no_timestamps_token_id = id("<|notimestamps|>");
  g.suppress_tokens = {id("<|startoftranscript|>"), id("<|translate|>"), id("<|transcribe|>"), id("<|startoflm|>"),
                       id("<|startofprev|>"), id("<|nospeech|>")};
  g.begin_suppress_tokens = {id("<|endoftext|>")};
  g.max_initial_timestamp_index = 50;
  g.is_multilingual = false;
  g.forced_decoder_ids = {{1, id("<|notimestamps|>")}};
  return g;
}

std::string generation_json(const GenerationDefaults& g) {
  return json{{"decoder_start_token_id", *g.decoder_start_token_id}, {"bos_token_id", *g.decoder_start_token_id},
              {"eos_token_id", g.eos_token_ids.front()}, {"pad_token_id", *g.pad_token_id},
              {"no_timestamps_token_id", *g.no_timestamps_token_id}, {"suppress_tokens", g.suppress_tokens},
              {"begin_suppress_tokens", g.begin_suppress_tokens}, {"max_initial_timestamp_index", *g.max_initial_timestamp_index},
              {"is_multilingual", false}, {"forced_decoder_ids", json::array({json::array({1, *g.no_timestamps_token_id})})},
              {"return_timestamps", false}, {"max_length", 448}}
             .dump(2) + "\n";
}

// path<TAB>transcript lines; paths relative to the manifest's folder.
std::vector<std::pair<std::string, std::string>> read_manifest(const std::string& path) {
  const auto base = std::filesystem::path(path).parent_path();
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& [file, text] : read_pairs_tsv(path, false)) {
    const auto p = std::filesystem::path(file);
    out.emplace_back((p.is_absolute() ? p : base / p).string(), text);
  }
  TFM_CHECK(!out.empty(), path, "holds no path<TAB>transcript lines");
  return out;
}

// Each clip read at the front end's rate, its window's features computed once (in parallel).
std::vector<SpeechClip> read_clips(const std::vector<std::pair<std::string, std::string>>& rows, const AudioFeatureExtractor& fx,
                                   const Tokenizer& tok) {
  std::vector<SpeechClip> clips(rows.size());
  std::string error;
#pragma omp parallel for schedule(dynamic, 16)
  for (std::size_t i = 0; i < rows.size(); ++i) {
    try {
      AudioReadOptions ro;
      ro.sample_rate = fx.options().sample_rate;
      const Audio a = read_audio(rows[i].first, ro);
      const Tensor w = fx(a.samples);  // (mels, window)
      const std::int64_t mels = w.size(0), window = w.size(1);
      const std::int64_t keep = std::min(window, static_cast<std::int64_t>(a.samples.size()) / fx.options().hop + 3);
      SpeechClip& c = clips[i];
      c.frames = Tensor::empty({mels, keep});
      for (std::int64_t m = 0; m < mels; ++m)
        std::copy_n(w.data<float>() + m * window, keep, c.frames.data<float>() + m * keep);
      c.padding = w.data<float>()[window - 1];
      c.seconds = a.seconds();
      c.transcript = rows[i].second;
      c.text = tok.encode(" " + rows[i].second);
    } catch (const Error& e) {
#pragma omp critical
      if (error.empty()) error = e.what();
    }
  }
  TFM_CHECK(error.empty(), "speech data", error);
  return clips;
}

TaskData speech_data(const TrainConfig& cfg, std::optional<Tokenizer>& tok) {
  const std::string where = cfg.source + ".data";
  TFM_CHECK(!cfg.test_file.empty(), where, "task \"speech\" needs \"test\": a manifest of held-out clips");
  const auto train_rows = read_manifest(cfg.train_file), test_rows = read_manifest(cfg.test_file);
  if (!tok) {
    std::vector<std::string> corpus;
    for (const auto& [file, text] : train_rows) corpus.push_back(" " + text);
    tok = speech_tokenizer(cfg, corpus);
  }
  const json model = json::parse(cfg.model_json);
  const std::int64_t mels = model.value("num_mel_bins", std::int64_t{80});
  const auto chunk = static_cast<std::int64_t>(std::llround(cfg.chunk_length));
  TFM_CHECK(std::abs(cfg.chunk_length - static_cast<double>(chunk)) < 1e-9, where + ".chunk_length",
            "must be a whole number of seconds (preprocessor_config.json's chunk_length)");
  const std::string pre = json{{"feature_extractor_type", "WhisperFeatureExtractor"}, {"feature_size", mels},
                               {"sampling_rate", 16000}, {"hop_length", cfg.hop_length}, {"n_fft", 400}, {"chunk_length", chunk},
                               {"n_samples", chunk * 16000}, {"nb_max_frames", chunk * 16000 / cfg.hop_length}, {"padding_value", 0.0},
                               {"padding_side", "right"}, {"return_attention_mask", false}}
                              .dump(2);
  const AudioFeatureExtractor fx = AudioFeatureExtractor::from_json(pre, where + " (its preprocessor_config.json)", mels);
  TaskData d;
  d.kind = TaskKind::speech;
  d.audio = fx;
  const GenerationDefaults g = speech_generation(*tok);
  d.special.sot = static_cast<std::int32_t>(*g.decoder_start_token_id);
  d.special.eot = static_cast<std::int32_t>(g.eos_token_ids.front());
  d.special.no_timestamps = static_cast<std::int32_t>(*g.no_timestamps_token_id);
  d.special.timestamp_begin = d.special.no_timestamps + 1;
  d.special.transcribe = tok->token_to_id("<|transcribe|>");
  d.special.translate = tok->token_to_id("<|translate|>");
  d.special.sot_prev = tok->token_to_id("<|startofprev|>");
  d.special.no_speech = tok->token_to_id("<|nospeech|>");
  for (std::int64_t id : g.suppress_tokens) d.special.suppress.push_back(static_cast<std::int32_t>(id));
  d.special.begin_suppress = {d.special.eot};
  d.model_files["preprocessor_config.json"] = pre + "\n";
  d.model_files["generation_config.json"] = generation_json(g);
  d.tok = &*tok;
  std::vector<SpeechClip> train = read_clips(train_rows, fx, *tok), test = read_clips(test_rows, fx, *tok);
  // A clip longer than the window would be cut off mid-sentence against its whole transcript:
  // such clips are left out of both splits, and the log says how many.
  for (auto* set : {&train, &test}) {
    const auto before = set->size();
    std::erase_if(*set, [&](const SpeechClip& c) { return c.seconds > cfg.chunk_length + 1e-9; });
    if (set->size() < before)
      std::fprintf(stderr, "speech data: %zu of %zu %s clips are longer than chunk_length %g s and are left out\n",
                   before - set->size(), before, set == &train ? "training" : "test", cfg.chunk_length);
  }
  TFM_CHECK(!test.empty(), where, "no test clip fits chunk_length ", cfg.chunk_length, " s");
  TFM_CHECK(static_cast<std::int64_t>(train.size()) >= cfg.batch_size, cfg.source, "the training manifest holds ", train.size(),
            " clips: too few for one batch of ", cfg.batch_size);
  SpeechDataOptions so;
  so.window_frames = fx.window_frames();
  so.frames_per_second = 16000.0 / static_cast<double>(cfg.hop_length);
  so.augment = {cfg.spec_time_masks, cfg.spec_time_width, cfg.spec_freq_masks, cfg.spec_freq_width};
  so.timestamps_fraction = cfg.timestamps_fraction;
  so.pack_fraction = cfg.pack_fraction;
  so.seed = cfg.seed;
  so.max_target_positions = model.value("max_target_positions", std::int64_t{448});
  d.speech.emplace(std::move(train), std::move(test), d.special, so);
  return d;
}

// Decoding for BLEU with the KV-cache Translator: greedy (batched) or beam search. Sources
// are the rows of the padded batch src (B, S), each cut to its valid length; with fused parts,
// each `parts` rows in turn are one example's (Fusion-in-Decoder, read as translate_fused reads).
std::vector<std::vector<std::int32_t>> decode_for_bleu(Model& m, const Tokenizer& tok, const Tensor& src, const Tensor& lens,
                                                       std::int64_t parts, std::int64_t max_len, std::int64_t beam) {
  const std::int64_t R = src.size(0), S = src.size(1), per = std::max<std::int64_t>(parts, 1), B = R / per;
  const auto ids = src.to_ints(), n = lens.to_ints();
  std::vector<std::vector<std::vector<std::int32_t>>> examples(static_cast<std::size_t>(B));
  for (std::int64_t r = 0; r < R; ++r)
    examples[static_cast<std::size_t>(r / per)].emplace_back(ids.begin() + r * S, ids.begin() + r * S + n[static_cast<std::size_t>(r)]);
  BeamOptions o;
  o.beam_size = beam;
  o.max_new_tokens = max_len;
  o.eos_id = tok.eos_id();
  const std::int64_t ctx = std::min(max_len + 1, m.config().max_positions);
  Translator tr(m, tok, {.ctx_size = ctx, .max_batch = std::max(B, beam), .max_source = per * S});
  std::vector<std::vector<std::int32_t>> sources;
  if (parts == 0)
    for (auto& e : examples) sources.push_back(std::move(e[0]));
  std::vector<std::vector<std::int32_t>> out;
  for (const auto& r : parts > 0 ? tr.translate_fused(examples, o) : tr.translate_ids(sources, o)) {
    std::vector<std::int32_t> t = r.hypotheses.empty() ? std::vector<std::int32_t>{} : r.hypotheses[0].tokens;
    if (!t.empty() && t.back() == o.eos_id) t.pop_back();
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace

TaskData make_task_data(const TrainConfig& cfg, std::optional<Tokenizer>& tok) {
  if (!std::filesystem::exists(cfg.train_file)) {
    const auto beside = std::filesystem::path(cfg.source).parent_path() / cfg.train_file;
    fail(cfg.source, "data.train: file '", cfg.train_file, "' not found (tried '",
         (std::filesystem::current_path() / cfg.train_file).lexically_normal().string(), "' and '",
         beside.lexically_normal().string(), "', beside the config)");
  }
  if (cfg.task == TaskKind::image_classifier) {
    tok.emplace();  // no text: an empty tokenizer keeps the model directory's shape
    return image_data(cfg);
  }
  if (cfg.task == TaskKind::speech) return speech_data(cfg, tok);
  if (cfg.task == TaskKind::classifier) return cls_data(cfg, tok);
  if (cfg.task == TaskKind::seq2seq) return s2s_data(cfg, tok);
  return lm_data(cfg, tok);
}

TaskData make_eval_data(const TrainConfig& cfg, const Tokenizer& tok, const std::string& path, bool header) {
  TFM_CHECK(std::filesystem::exists(path), "eval", "data '", path, "' not found");
  TaskData d;
  d.kind = cfg.task;
  if (cfg.task == TaskKind::image_classifier) {
    TFM_CHECK(std::filesystem::is_directory(path), "eval", "--data '", path,
              "' must be a folder of class folders for an image classifier");
    LabeledImages test = read_image_folder(path, cfg.labels);
    d.label_names = test.label_names;
    d.positive = positive_class(cfg, d.label_names);
    d.images.emplace(LabeledImages{{}, {}, test.label_names}, std::move(test),
                     ImageProcessor::from_json(cfg.preprocessor_json, cfg.source + ".data.preprocessor"), ImageAugment{}, cfg.seed);
    return d;
  }
  if (cfg.task == TaskKind::lm) {
    TokenStore ids(tok.vocab_size());
    TextReader in(path);
    std::string piece;
    while (in.next_piece(piece)) ids.append(tok.encode(piece));
    const std::int64_t n = ids.size();
    d.lm.emplace(TokenStore(tok.vocab_size()), std::move(ids), cfg.block_size, cfg.seed);
    TFM_CHECK(d.lm->val_sequences() >= 1, path, "holds ", n, " tokens: fewer than one window of ", cfg.block_size + 1,
              " (context + 1); lower --ctx");
  } else if (cfg.task == TaskKind::classifier) {
    const LabeledText lt = read_labeled_tsv(path, header, cfg.labels);
    TFM_CHECK(!lt.texts.empty(), path, "holds no label<TAB>text lines");
    TFM_CHECK(tok.bos_id() >= 0 && tok.pad_id() >= 0, "classifier", "the tokenizer needs <bos> and <pad> tokens");
    std::vector<ClsExample> test;
    for (std::size_t i = 0; i < lt.texts.size(); ++i) test.push_back(cls_example(cfg, tok, lt.texts[i], lt.labels[i]));
    d.label_names = lt.label_names;
    d.positive = positive_class(cfg, lt.label_names);
    d.cls.emplace(std::vector<ClsExample>{}, std::move(test), cfg.seed, tok.pad_id());
  } else {
    const auto pairs = read_pairs_tsv(path, header);
    TFM_CHECK(!pairs.empty(), path, "holds no source<TAB>target lines");
    TFM_CHECK(tok.bos_id() >= 0 && tok.eos_id() >= 0 && tok.pad_id() >= 0, "seq2seq",
              "the tokenizer needs <bos>, <eos> and <pad> tokens");
    std::vector<PairExample> test;
    for (const auto& p : pairs) {
      test.push_back({pair_side(cfg, tok, p.first), pair_side(cfg, tok, p.second), {}});
      d.test_refs.push_back(p.second);
      if (cfg.fusion) d.test_pairs.push_back(p);
    }
    d.s2s.emplace(std::vector<PairExample>{}, std::move(test), cfg.seed, tok.pad_id(), tok.bos_id(), cfg.batch_size);
  }
  return d;
}

ModelConfig task_model_config(const TrainConfig& cfg, const TaskData& d, std::int64_t vocab) {
  json m = json::parse(cfg.model_json);
  const std::string where = cfg.source + ".model";
  bool contrastive = false;  // the config as written (the keys added below are not CLIP's)
  try {
    contrastive = parse_model_config(cfg.model_json, where).text_tower.enabled();
  } catch (const Error&) {
  }
  TFM_CHECK(!contrastive, where, "a CLIP model is not trained by these tasks (contrastive image-text training is not ",
            "built); tfm classify --labels, tfm embed and tfm serve run it");
  const bool classifier = d.kind == TaskKind::classifier || d.kind == TaskKind::image_classifier;
  if (!m.contains("vocab_size") && d.kind != TaskKind::image_classifier) m["vocab_size"] = vocab;
  if (classifier && !m.contains("num_labels")) m["num_labels"] = d.label_names.size();
  if (d.kind == TaskKind::speech && !m.contains("max_source_positions")) m["max_source_positions"] = d.audio->window_frames() / 2;
  ModelConfig mc = parse_model_config(m.dump(), where);
  if (classifier && mc.id2label.empty()) mc.id2label = d.label_names;  // saved in config.json
  if (d.kind == TaskKind::image_classifier) {
    TFM_CHECK(mc.reads_images() && mc.head == HeadKind::classifier, where,
              "task 'image_classifier' needs an image model (e.g. model_type \"vit\") with a classifier head");
    TFM_CHECK(mc.num_labels == static_cast<std::int64_t>(d.label_names.size()), where, "num_labels ", mc.num_labels,
              " but the data has ", d.label_names.size(), " classes");
    // Another size than image_size is trained with resized positions (fine-tuning at a higher
    // resolution, as DeiT and ViT do); fewer pixels than one patch make no token.
    const auto [h, w] = d.images->pixel_size();
    TFM_CHECK(h >= mc.patch_size && w >= mc.patch_size && mc.num_channels == 3, where, "the model reads ",
              mc.num_channels, "-channel images of ", mc.patch_size, " x ", mc.patch_size,
              " patches but data.preprocessor gives 3 x ", h, " x ", w, " (set num_channels 3, or the preprocessor's size)");
    return mc;
  }
  if (d.kind == TaskKind::speech) {
    // The sizes the data decides, unless the config sets them: the encoder's positions for the
    // window, the special tokens.
    if (!m.contains("max_source_positions")) m["max_source_positions"] = d.audio->window_frames() / 2;
    if (!m.contains("decoder_start_token_id")) m["decoder_start_token_id"] = d.special.sot;
    if (!m.contains("bos_token_id")) m["bos_token_id"] = d.special.sot;
    if (!m.contains("eos_token_id")) m["eos_token_id"] = d.special.eot;
    if (!m.contains("pad_token_id")) m["pad_token_id"] = d.special.eot;
    mc = parse_model_config(m.dump(), where);
    TFM_CHECK(mc.reads_audio() && mc.architecture == Architecture::encoder_decoder, where,
              "task 'speech' needs a speech model (model_type \"whisper\")");
    TFM_CHECK(mc.num_mel_bins == d.audio->options().n_mels, where, "num_mel_bins ", mc.num_mel_bins, " but the front end gives ",
              d.audio->options().n_mels);
    TFM_CHECK(2 * mc.max_source_positions >= d.audio->window_frames(), where, "max_source_positions ", mc.max_source_positions,
              " is too few for a window of ", d.audio->window_frames(), " frames (data.chunk_length)");
  }
  TFM_CHECK(mc.vocab_size >= vocab, where, "vocab_size ", mc.vocab_size, " < the tokenizer's ", vocab);
  if (d.kind == TaskKind::lm) {
    TFM_CHECK(mc.architecture == Architecture::decoder_only && mc.head == HeadKind::lm, where,
              "task 'lm' needs a decoder-only model with an lm head, got ", to_string(mc.architecture), " / ",
              to_string(mc.head));
    TFM_CHECK(cfg.block_size <= mc.max_positions || mc.position != PositionKind::learned, cfg.source,
              "data.block_size ", cfg.block_size, " exceeds the model's max_positions ", mc.max_positions);
  } else if (d.kind == TaskKind::speech) {
    // checked above
  } else if (d.kind == TaskKind::seq2seq) {
    TFM_CHECK(mc.architecture == Architecture::encoder_decoder && mc.head == HeadKind::lm, where,
              "task 'seq2seq' needs an encoder-decoder model with an lm head, got ", to_string(mc.architecture));
    TFM_CHECK(cfg.max_length <= mc.max_positions || mc.position != PositionKind::learned, cfg.source,
              "data.max_length ", cfg.max_length, " exceeds the model's max_positions ", mc.max_positions);
  } else {
    TFM_CHECK(mc.architecture == Architecture::encoder_only && mc.head == HeadKind::classifier, where,
              "task 'classifier' needs an encoder-only model with a classifier head, got ", to_string(mc.architecture),
              " / ", to_string(mc.head));
    TFM_CHECK(mc.num_labels == static_cast<std::int64_t>(d.label_names.size()), where, "num_labels ", mc.num_labels,
              " but the data has ", d.label_names.size(), " labels");
    TFM_CHECK(cfg.max_length <= mc.max_positions || mc.position != PositionKind::learned, cfg.source,
              "data.max_length ", cfg.max_length, " exceeds the model's max_positions ", mc.max_positions);
  }
  return mc;
}

ChunkDatabase retro_database(const TrainConfig& cfg, const TaskData& d, const RetrievalConfig& rc) {
  TFM_CHECK(d.lm.has_value(), cfg.source, "a retrieval model (RETRO) trains on task \"lm\"");
  std::vector<std::int32_t> stream;
  const auto add = [&](const TokenStore& s) {
    for (std::int64_t i = 0; i < s.size(); ++i) stream.push_back(s[i]);
  };
  add(d.lm->train_stream());
  if (cfg.retrieval_db == "train+val") add(d.lm->val_stream());
  return ChunkDatabase(std::move(stream), rc);
}

Tensor training_neighbours(const ChunkDatabase& db, const Tensor& x, const std::vector<std::int64_t>& starts,
                           std::int64_t block, std::vector<std::int64_t>* positions) {
  const RetrievalConfig& rc = db.config();
  const std::int64_t B = x.size(0), T = x.size(1), m = rc.chunk_size, reading = (T + m - 1) / m - 1;
  if (reading <= 0) return Tensor();
  std::vector<std::pair<std::int64_t, std::int64_t>> own;
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t i = 0; i < reading; ++i) own.emplace_back(starts[static_cast<std::size_t>(b)], starts[static_cast<std::size_t>(b)] + block + 1);
  const Tensor chunks = reshape(contiguous(slice(x, 1, 0, reading * m)), {B * reading, m});
  return reshape(db.search(chunks, own, positions), {B, reading, rc.neighbours, rc.length()});
}

MicroBatch load_micro_batch(TaskData& d, const Model& m, const TrainConfig& cfg, std::int64_t cursor, std::int64_t rows) {
  MicroBatch b;
  ModelInputs& in = b.in;
  Tensor& targets = b.targets;
  std::int64_t& tokens = b.tokens;
  if (d.kind == TaskKind::lm) {
    std::vector<std::int64_t> starts;
    d.lm->train_batch(cursor, rows, in.input_ids, targets, &starts);
    if (d.retro) in.neighbours = training_neighbours(*d.retro, in.input_ids, starts, cfg.block_size);
    tokens = in.input_ids.numel();
  } else if (d.kind == TaskKind::seq2seq) {
    d.s2s->train_batch(cursor, rows, in.input_ids, in.valid_lens, in.decoder_input_ids, targets);
    in.fused_parts = d.s2s->fused_parts();
    tokens = in.decoder_input_ids.numel();
  } else if (d.kind == TaskKind::speech) {
    const bool ctc = cfg.ctc_weight > 0;
    d.speech->train_batch(cursor, rows, in.input_features, in.decoder_input_ids, targets, ctc ? &b.ctc_targets : nullptr,
                          ctc ? &b.ctc_target_lengths : nullptr);
    if (ctc) b.ctc_blank = d.special.no_speech;
    tokens = in.decoder_input_ids.numel();
  } else if (d.kind == TaskKind::image_classifier) {
    d.images->train_batch(cursor, rows, in.pixel_values, targets);
    tokens = rows * (m.config().prefix_tokens() + (in.pixel_values.size(2) / m.config().patch_size) *
                                                     (in.pixel_values.size(3) / m.config().patch_size));
  } else {
    d.cls->train_batch(cursor, rows, in.input_ids, in.valid_lens, targets);
    tokens = 0;
    for (std::int64_t n : in.valid_lens.to_ints()) tokens += n;
  }
  // Token targets: a vocabulary-split shard's loss reads its own columns of the logits (a
  // distiller, refused under tensor parallelism, gets the whole ones: no effect on a whole model).
  in.shard_logits = targets.dim() == 2;
  for (std::int64_t t : targets.to_ints()) b.loss_terms += t != -100 ? 1 : 0;
  return b;
}

Tensor token_loss(const Model& m, const Tensor& logits, const Tensor& targets, const TrainConfig& cfg) {
  return m.logits_cross_entropy(logits, targets, static_cast<float>(cfg.label_smoothing));
}

Tensor logits_loss(const Model& m, const Tensor& logits, const Tensor& targets, const TrainConfig& cfg) {
  if (targets.dim() == 1)  // a label per example: the classifiers' logits (B, num_labels)
    return cross_entropy(logits, targets, -100, static_cast<float>(cfg.label_smoothing));
  return token_loss(m, logits, targets, cfg);
}

namespace {

// Joint CTC/attention training (Kim, Hori and Watanabe 2017): a CTC loss over the encoder's
// states pulls each frame toward the token being spoken, which teaches the encoder an alignment
// long before the decoder's cross-attention finds one. The CTC head is the decoder's own head
// (Model::head: Whisper's tied token embedding), so the saved model is a plain Whisper layout;
// the blank is <|nospeech|>, which no transcript contains.
Tensor joint_ctc_loss(Model& m, const Tensor& encoder_states, const MicroBatch& batch, const Tensor& decoder_loss,
                      double weight) {
  const Tensor log_probs = log_softmax(m.head(encoder_states), -1);
  const std::int64_t B = log_probs.size(0), frames = log_probs.size(1);
  const Tensor lengths = Tensor::full({B}, static_cast<float>(frames), DType::i64);
  const Tensor ctc = ctc_loss(log_probs, lengths, batch.ctc_targets, batch.ctc_target_lengths, batch.ctc_blank,
                              LossReduction::mean, /*zero_infinity=*/true);
  return add(mul_scalar(decoder_loss, static_cast<float>(1.0 - weight)), mul_scalar(ctc, static_cast<float>(weight)));
}

// The CTC head's best path of each row: the most likely token of every frame, repeats merged,
// blanks dropped (no language model; it shows what the encoder alone has learned to hear).
std::vector<std::string> ctc_greedy(Model& m, const Tensor& encoder_states, const Tokenizer& tok, std::int32_t blank) {
  const Tensor best = argmax(m.head(encoder_states), -1);
  const std::int64_t B = best.size(0), frames = best.size(1);
  const std::vector<std::int64_t> ids = best.to_ints();
  std::vector<std::string> out;
  for (std::int64_t b = 0; b < B; ++b) {
    std::vector<std::int32_t> path;
    std::int64_t prev = -1;
    for (std::int64_t t = 0; t < frames; ++t) {
      const std::int64_t id = ids[static_cast<std::size_t>(b * frames + t)];
      if (id != prev && id != blank) path.push_back(static_cast<std::int32_t>(id));
      prev = id;
    }
    out.push_back(tok.decode(path, /*skip_special=*/true));
  }
  return out;
}

}  // namespace

Tensor micro_batch_loss(const MicroBatch& batch, Model& m, const TrainConfig& cfg, Distiller* distill) {
  const ModelInputs& in = batch.in;
  const Tensor& targets = batch.targets;
  HiddenStates hidden;  // the student's layer outputs, when distillation matches them
  ModelOutputs out;
  if (distill != nullptr && distill->wants_hidden()) m.set_hidden_capture(&hidden);
  try {
    out = m.forward(in);
  } catch (...) {
    m.set_hidden_capture(nullptr);
    throw;
  }
  m.set_hidden_capture(nullptr);
  // A DeiT student learns the true labels on its [CLS] head when its distillation head learns
  // the teacher's; without a teacher both heads learn them through their mean.
  const Tensor& label_logits = distill != nullptr && out.cls_logits.defined() ? out.cls_logits : out.logits;
  Tensor hard = logits_loss(m, targets.dim() == 1 ? label_logits : out.logits, targets, cfg);
  if (batch.ctc_targets.defined()) hard = joint_ctc_loss(m, out.encoder_hidden, batch, hard, cfg.ctc_weight);
  return distill != nullptr ? distill->loss(in, targets, out, hidden, hard) : hard;
}

metrics::BleuTokenizer bleu_tokenizer_for(const TrainConfig& cfg, const std::vector<std::string>& refs) {
  return cfg.bleu_tokenize == "auto" ? metrics::default_bleu_tokenizer(refs) : metrics::bleu_tokenizer_from_name(cfg.bleu_tokenize);
}

std::map<std::string, double> evaluate(TaskData& d, Model& m, const TrainConfig& cfg, EvalDetail* detail) {
  NoGradGuard no_grad;
  m.set_training(false);
  std::map<std::string, double> out;
  double sum = 0;
  if (d.kind == TaskKind::lm) {
    const std::int64_t total = std::min(d.lm->val_sequences(), cfg.eval_batches * cfg.batch_size);
    for (std::int64_t first = 0; first < total; first += cfg.batch_size) {
      Tensor x, y;
      d.lm->val_batch(first, std::min(cfg.batch_size, total - first), x, y);
      ModelInputs in;
      in.input_ids = x;
      const Tensor logits = m.forward(in).logits;
      sum += cross_entropy(reshape(logits, {-1, logits.size(-1)}), reshape(y, {-1}), -100, 0.0f, LossReduction::sum).item();
    }
    out["loss"] = sum / static_cast<double>(total * cfg.block_size);
    out["perplexity"] = std::exp(out["loss"]);
  } else if (d.kind == TaskKind::speech) {
    double count = 0;
    const std::int64_t n = std::min(cfg.wer_examples, d.speech->test_size());
    std::vector<std::string> ctc_hyps;  // the CTC head's greedy transcripts, when it was trained
    for (std::int64_t first = 0; first < d.speech->test_size(); first += cfg.batch_size) {
      ModelInputs in;
      Tensor labels;
      d.speech->test_batch(first, cfg.batch_size, in.input_features, in.decoder_input_ids, labels);
      const ModelOutputs o = m.forward(in);
      sum += cross_entropy(reshape(o.logits, {-1, o.logits.size(-1)}), reshape(labels, {-1}), -100, 0.0f, LossReduction::sum).item();
      for (std::int64_t l : labels.to_ints()) count += l != -100;
      if (cfg.ctc_weight > 0 && first < n)
        for (std::string& h : ctc_greedy(m, o.encoder_hidden, *d.tok, d.special.no_speech)) ctc_hyps.push_back(std::move(h));
    }
    out["loss"] = sum / count;
    if (n > 0) {
      // Each test clip's window transcribed (greedy, eval.beam beams, joint CTC/attention with
      // eval.ctc_weight), scored as Whisper's papers do: WER after its basic normaliser (case and
      // punctuation, which the speech does not carry, ignored).
      Transcriber tr(m, *d.tok, d.special, *d.audio, cfg.bleu_beam);
      std::vector<std::string> hyps, refs;
      const std::vector<std::int32_t> prompt{d.special.sot, d.special.no_timestamps};
      for (std::int64_t i = 0; i < n; ++i) {
        const SpeechClip& c = d.speech->test()[static_cast<std::size_t>(i)];
        hyps.push_back(tr.decode_window(d.speech->window(c), prompt, false, 0.0, 128, 0, cfg.bleu_beam, cfg.eval_ctc_weight).text);
        refs.push_back(c.transcript);
      }
      const auto r = metrics::error_rates(refs, hyps, metrics::TranscriptNormalizer::basic);
      out["wer"] = r.words.rate();
      out["cer"] = r.chars.rate();
      if (!ctc_hyps.empty()) {
        ctc_hyps.resize(static_cast<std::size_t>(n));
        const auto c = metrics::error_rates(refs, ctc_hyps, metrics::TranscriptNormalizer::basic);
        out["ctc_wer"] = c.words.rate();
        out["ctc_cer"] = c.chars.rate();
      }
      if (detail) detail->hypotheses = std::move(hyps);
    }
  } else if (d.kind == TaskKind::seq2seq) {
    const auto& test = d.s2s->test();
    double count = 0;
    std::vector<std::string> hyps, refs;
    for (std::size_t first = 0; first < test.size(); first += static_cast<std::size_t>(cfg.batch_size)) {
      std::vector<const PairExample*> ex;
      for (std::size_t i = first; i < std::min(test.size(), first + static_cast<std::size_t>(cfg.batch_size)); ++i) ex.push_back(&test[i]);
      ModelInputs in;
      Tensor labels;
      d.s2s->pack(ex, in.input_ids, in.valid_lens, in.decoder_input_ids, labels);
      in.fused_parts = d.s2s->fused_parts();
      const Tensor logits = m.forward(in).logits;
      sum += cross_entropy(reshape(logits, {-1, logits.size(-1)}), reshape(labels, {-1}), -100, 0.0f, LossReduction::sum).item();
      for (std::int64_t l : labels.to_ints()) count += l != -100;
      if (static_cast<std::int64_t>(first) >= cfg.bleu_examples) continue;
      for (const auto& ids : decode_for_bleu(m, *d.tok, in.input_ids, in.valid_lens, in.fused_parts, cfg.max_length, cfg.bleu_beam)) {
        if (static_cast<std::int64_t>(hyps.size()) >= cfg.bleu_examples) break;
        hyps.push_back(d.tok->decode(ids, /*skip_special=*/true));
        refs.push_back(d.test_refs[hyps.size() - 1]);
      }
    }
    out["loss"] = sum / count;
    out["perplexity"] = std::exp(out["loss"]);
    if (!hyps.empty()) {
      metrics::BleuOptions bo;
      bo.tokenize = bleu_tokenizer_for(cfg, refs);
      const auto bleu = metrics::corpus_bleu(hyps, {refs}, bo);
      const auto chrf = metrics::corpus_chrf(hyps, {refs});
      out["bleu"] = bleu.score;
      out["chrf"] = chrf.score;
      if (detail) {
        detail->signatures["bleu"] = bleu.signature;
        detail->signatures["chrf"] = chrf.signature;
        detail->hypotheses = std::move(hyps);
      }
    }
  } else {
    std::vector<std::int64_t> pred, truth;
    const std::int64_t n = d.images ? d.images->test_size() : d.cls->test_size();
    // CLIP, zero-shot: every batch of pictures against the classes' label texts.
    TextTowerInput labels;
    if (m.config().text_tower.enabled()) {
      TFM_CHECK(d.tok != nullptr && d.zero_shot_texts.size() == d.label_names.size(), "eval",
                "a CLIP model is scored against a label text per class");
      labels = text_tower_input(*d.tok, m.config().text_tower, d.zero_shot_texts);
    }
    for (std::int64_t first = 0; first < n; first += cfg.batch_size) {  // the whole test split
      ModelInputs in;
      Tensor y;
      in.input_ids = labels.ids;  // (CLIP's label texts; undefined otherwise)
      in.valid_lens = labels.lens;
      if (d.images) d.images->test_batch(first, cfg.batch_size, in.pixel_values, y);
      else d.cls->test_batch(first, cfg.batch_size, in.input_ids, in.valid_lens, y);
      const Tensor logits = m.forward(in).logits;
      sum += cross_entropy(logits, y, -100, 0.0f, LossReduction::sum).item();
      for (std::int64_t p : argmax(logits, -1).to_ints()) pred.push_back(p);
      for (std::int64_t t : y.to_ints()) truth.push_back(t);
    }
    const ClassScores s = class_scores(pred, truth, d.positive);
    out["loss"] = sum / static_cast<double>(truth.size());
    out["accuracy"] = s.accuracy, out["precision"] = s.precision, out["recall"] = s.recall, out["f1"] = s.f1;
    if (detail) {
      const std::size_t k = d.label_names.size();
      detail->confusion.assign(k, std::vector<std::int64_t>(k, 0));
      for (std::size_t i = 0; i < truth.size(); ++i)
        if (static_cast<std::size_t>(truth[i]) < k && static_cast<std::size_t>(pred[i]) < k)
          ++detail->confusion[static_cast<std::size_t>(truth[i])][static_cast<std::size_t>(pred[i])];
    }
  }
  m.set_training(true);
  return out;
}

}  // namespace tfm::train_detail
