// Whisper against tools/reference/ref_whisper.py (modeling_whisper's forward written out in
// float64, a hub directory with random weights and an English-only vocabulary): the encoder
// output, the decoder's logits and every parameter's gradient (the convolution stem's
// included), greedy decoding with and without timestamps through the KV cache, and the
// timestamp rules alone.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>

#include "support/test_support.h"
#include "tfm/load.h"
#include "tfm/tfm.h"
#include "tfm/transcribe.h"

using namespace tfm;

namespace {

std::string hub_dir(const std::string& name) {
  const char* d = std::getenv("TFM_FIXTURE_DIR");
  return std::string(d ? d : "fixtures") + "/hub/" + name;
}

const SafetensorsFile& ref() {
  static const SafetensorsFile r = load_safetensors(hub_dir("whisper_en") + ".ref.safetensors");
  return r;
}

std::vector<std::int32_t> ids_of(const Tensor& t) {
  std::vector<std::int32_t> v;
  for (std::int64_t x : t.to_ints()) v.push_back(static_cast<std::int32_t>(x));
  return v;
}

Tensor features() { return reshape(ref().tensors.at("input_features"), {80, 3000}); }

}  // namespace

TEST(WhisperParity, EncoderOutputLogitsAndEveryGradient) {
  LoadedWeights w = load_model_weights(hub_dir("whisper_en"));
  EXPECT_EQ(w.config.model_type, "whisper");
  EXPECT_EQ(w.config.num_mel_bins, 80);
  ModelInputs in;
  in.input_features = ref().tensors.at("input_features");
  in.decoder_input_ids = ref().tensors.at("decoder_input_ids");
  for (auto& [name, p] : w.model.parameters()) p.requires_grad_();
  const ModelOutputs out = w.model.forward(in);
  test::expect_close(out.encoder_hidden, ref().tensors.at("encoder_hidden"), 1e-4, 1e-4, "encoder_hidden");
  test::expect_close(out.logits, ref().tensors.at("logits"), 1e-4, 1e-4, "logits");
  backward(out.logits, ref().tensors.at("w"));
  for (const auto& [name, p] : w.model.parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    // The gradients sum over 1500 encoder positions and a 51864-word vocabulary in f32 (the
    // reference in f64): elements that cancel to near zero carry the rounding of the large
    // terms, so the absolute tolerance scales with the tensor's largest gradient.
    const Tensor& want = ref().tensors.at("grad." + name);
    double scale = 0;
    for (std::int64_t i = 0; i < want.numel(); ++i) scale = std::max(scale, std::abs(static_cast<double>(want.data<float>()[i])));
    test::expect_close(p.grad(), want, 1e-4, std::max(2e-5, 1e-5 * scale), "grad " + name);
  }
}

TEST(WhisperParity, GreedyWithoutTimestampsThroughTheCache) {
  LoadedModel lm = load_model(hub_dir("whisper_en"));
  Transcriber t(lm);
  EXPECT_FALSE(t.tokens().multilingual);
  EXPECT_EQ(t.tokens().timestamp_begin, 50363);
  const std::vector<std::int32_t> prompt = t.prompt({}, "", "transcribe", false);
  EXPECT_EQ(prompt, (std::vector<std::int32_t>{50257, 50362}));
  const WindowResult r = t.decode_window(features(), prompt, false, 0.0, 20, 0);
  EXPECT_EQ(r.tokens, ids_of(ref().tensors.at("greedy")));
}

TEST(WhisperParity, GreedyWithTimestampRules) {
  LoadedModel lm = load_model(hub_dir("whisper_en"));
  Transcriber t(lm);
  const std::vector<std::int32_t> prompt = t.prompt({}, "", "transcribe", true);
  EXPECT_EQ(prompt, (std::vector<std::int32_t>{50257}));
  const WindowResult r = t.decode_window(features(), prompt, true, 0.0, 20, 0);
  EXPECT_EQ(r.tokens, ids_of(ref().tensors.at("greedy_ts")));
}

TEST(WhisperParity, TimestampRulesAlone) {
  LoadedModel lm = load_model(hub_dir("whisper_en"));
  const WhisperTokens tok = WhisperTokens::of(lm);
  for (const std::string suffix : {"", "_1", "_2", "_3", "_4", "_5"}) {
    const Tensor& in = ref().tensors.at("ts_filter_in" + suffix);
    const Tensor& want = ref().tensors.at("ts_filter_out" + suffix);
    std::vector<float> row(in.data<float>(), in.data<float>() + in.numel());
    std::vector<std::int32_t> sampled = ids_of(ref().tensors.at("ts_filter_prefix" + suffix));
    sampled.erase(sampled.begin());  // the prompt [<|startoftranscript|>]
    apply_timestamp_rules(row, sampled, tok);
    const float* w = want.data<float>();
    for (std::size_t i = 0; i < row.size(); ++i) {
      ASSERT_EQ(std::isinf(row[i]), std::isinf(w[i])) << "case '" << suffix << "' token " << i;
      if (!std::isinf(w[i])) {
        ASSERT_EQ(row[i], w[i]) << "case '" << suffix << "' token " << i;
      }
    }
  }
}

// whisper_en_beam (another seed; the end token's embedding scaled so beams finish): whisper's
// beam search (5 beams, patience 1, the likeliest per token) token for token, with and without
// timestamps, its summed log-probability, and greedy decoding that ends on the end token.
TEST(WhisperParity, BeamSearchAsWhisper) {
  LoadedModel lm = load_model(hub_dir("whisper_en_beam"));
  const SafetensorsFile r = load_safetensors(hub_dir("whisper_en_beam") + ".ref.safetensors");
  const Tensor f = reshape(r.tensors.at("input_features"), {80, 3000});
  Transcriber t(lm, 5);
  std::vector<std::int32_t> greedy = ids_of(r.tensors.at("greedy"));
  ASSERT_EQ(greedy.back(), 50256);  // the reference keeps the end token; the engine stops at it
  greedy.pop_back();
  EXPECT_EQ(t.decode_window(f, {50257, 50362}, false, 0.0, 20, 0).tokens, greedy);
  const WindowResult beam = t.decode_window(f, {50257, 50362}, false, 0.0, 20, 0, 5);
  EXPECT_EQ(beam.tokens, ids_of(r.tensors.at("beam")));
  EXPECT_NEAR(beam.sum_logprob, r.tensors.at("beam_sum_logprob").item(), 1e-4 * 146);
  const WindowResult ts = t.decode_window(f, {50257}, true, 0.0, 20, 0, 5);
  EXPECT_EQ(ts.tokens, ids_of(r.tensors.at("beam_ts")));
  EXPECT_NEAR(ts.sum_logprob, r.tensors.at("beam_ts_sum_logprob").item(), 1e-4 * 25);
  // One beam is greedy.
  EXPECT_EQ(t.decode_window(f, {50257, 50362}, false, 0.0, 20, 0, 1).tokens, greedy);
}

namespace {

const SafetensorsFile& words_ref() {
  static const SafetensorsFile r = load_safetensors(hub_dir("whisper_en") + ".words.safetensors");
  return r;
}

std::vector<std::string> texts_of(const Tensor& t) {
  std::vector<std::string> out(1);
  for (std::int64_t b : t.to_ints()) {
    if (b == 0) out.emplace_back();
    else out.back() += static_cast<char>(b);
  }
  return out;
}

// Words (text, token count, start, end, probability) against the reference's `tag`_* tensors.
void expect_words(const std::vector<WordTiming>& got, const std::string& tag) {
  const auto& r = words_ref().tensors;
  const auto text = texts_of(r.at(tag + "_text"));
  const auto start = r.at(tag + "_start").to_floats(), end = r.at(tag + "_end").to_floats();
  const auto prob = r.at(tag + "_prob").to_floats();
  ASSERT_EQ(got.size(), text.size()) << tag;
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].word, text[i]) << tag << " word " << i;
    EXPECT_NEAR(got[i].start, start[i], 1e-5) << tag << " " << text[i];
    EXPECT_NEAR(got[i].end, end[i], 1e-5) << tag << " " << text[i];
    EXPECT_NEAR(got[i].probability, prob[i], 1e-4) << tag << " " << text[i];
    if (r.count(tag + "_ntok")) {
      EXPECT_EQ(static_cast<std::int64_t>(got[i].tokens.size()), r.at(tag + "_ntok").to_ints()[i]) << tag << " " << text[i];
    }
  }
}

}  // namespace

TEST(WhisperParity, WordAlignmentAsWhisper) {
  // find_alignment: the alignment heads' cross-attention over the first 1200 positions, the
  // DTW path, the words split on spaces and punctuation (English) or characters (Chinese).
  LoadedModel lm = load_model(hub_dir("whisper_en"));
  EXPECT_EQ(lm.generation.alignment_heads, (std::vector<std::pair<std::int64_t, std::int64_t>>{{1, 0}, {1, 2}}));
  Transcriber t(lm, 1);
  std::vector<std::int32_t> tokens = ids_of(words_ref().tensors.at("tokens"));
  const std::int64_t frames = words_ref().tensors.at("num_frames").to_ints()[0];
  expect_words(t.align_words(features(), tokens, frames, "en", "transcribe"), "align");
  expect_words(t.align_words(features(), tokens, frames, "zh", "transcribe"), "zh");
}

TEST(WhisperParity, WordTimestampsOfSegmentsAsWhisper) {
  // add_word_timestamps: punctuation merged (' "The', ' (over)', ' dog."'), each segment's words,
  // its bounds fitted to them.
  LoadedModel lm = load_model(hub_dir("whisper_en"));
  Transcriber t(lm, 1);
  const std::vector<std::int32_t> tokens = ids_of(words_ref().tensors.at("tokens"));
  const std::int32_t ts = t.tokens().timestamp_begin;
  std::vector<TranscriptSegment> segs(2);
  segs[0].start = 0.0, segs[0].end = 1.3;
  segs[0].tokens = {ts};
  segs[0].tokens.insert(segs[0].tokens.end(), tokens.begin(), tokens.begin() + 8);
  segs[0].tokens.push_back(ts + 65);
  segs[1].start = 1.3, segs[1].end = 3.0;
  segs[1].tokens = {ts + 65};
  segs[1].tokens.insert(segs[1].tokens.end(), tokens.begin() + 8, tokens.end());
  segs[1].tokens.push_back(ts + 150);
  double last_speech = 0;
  TranscribeOptions o;
  t.add_word_timestamps(segs, features(), words_ref().tensors.at("num_frames").to_ints()[0], "en", o, last_speech);
  const auto& r = words_ref().tensors;
  std::vector<WordTiming> all;
  std::vector<std::int64_t> seg_of;
  for (std::size_t k = 0; k < segs.size(); ++k)
    for (const WordTiming& w : segs[k].words) all.push_back(w), seg_of.push_back(static_cast<std::int64_t>(k));
  expect_words(all, "aw");
  EXPECT_EQ(seg_of, r.at("aw_segment").to_ints());
  for (std::size_t k = 0; k < segs.size(); ++k) {
    EXPECT_NEAR(segs[k].start, r.at("seg_start").to_floats()[k], 1e-5) << "segment " << k;
    EXPECT_NEAR(segs[k].end, r.at("seg_end").to_floats()[k], 1e-5) << "segment " << k;
  }
  EXPECT_DOUBLE_EQ(last_speech, segs[1].end);
}
