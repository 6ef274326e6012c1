// OpenAI's audio API on a Whisper-style model: POST /v1/audio/transcriptions and
// /v1/audio/translations take a multipart upload (file, model, language, prompt,
// response_format, temperature, timestamp_granularities[]: segment and word) and answer json,
// text, srt, vtt or verbose_json (with "words" when asked for). The upload is decoded in memory (any format libsndfile reads); a bad file is
// a 400 naming it, and the server keeps serving.
#include <cmath>

#include "routes.h"
#include "tfm/audio.h"
#include "tfm/error.h"
#include "tfm/transcribe.h"

namespace tfm::server {
namespace {

const std::initializer_list<const char*> kAudioFields = {"file", "model", "language", "prompt", "response_format",
                                                         "temperature", "timestamp_granularities[]", "timestamp_granularities"};

std::optional<std::string> field(const httplib::Request& req, const char* name) {
  if (!req.has_file(name)) return std::nullopt;
  return req.get_file_value(name).content;
}

void audio_route(ServerContext& cx, const httplib::Request& req, httplib::Response& res, const std::string& task) {
  if (!cx.lm.config.reads_audio())
    throw ApiError(400, "invalid_request_error", "model_not_supported", "this model does not read audio (no num_mel_bins)");
  if (!req.is_multipart_form_data())
    throw ApiError(400, "invalid_request_error", "bad_body", "the audio API takes a multipart/form-data upload");
  for (const auto& [name, part] : req.files) {
    bool known = false;
    for (const char* k : kAudioFields) known = known || name == k;
    if (!known || (task == "translate" && name == "language"))
      throw ApiError(400, "invalid_request_error", "unknown_parameter", "unknown form field '" + name + "'", name);
  }
  if (!req.has_file("file")) bad_param("file", "the form has no 'file' part (the audio to transcribe)");
  const httplib::MultipartFormData& upload = req.get_file_value("file");
  const std::string format = field(req, "response_format").value_or("json");
  if (format != "json" && format != "text" && format != "srt" && format != "vtt" && format != "verbose_json")
    bad_param("response_format", "response_format must be json, text, srt, vtt or verbose_json");
  // timestamp_granularities: "segment" (always there) and "word" (word timestamps), each a
  // repeated field; OpenAI's API gives them with verbose_json only.
  TranscribeOptions o;
  for (const auto& [name, part] : req.files) {
    if (name.rfind("timestamp_granularities", 0) != 0) continue;
    if (part.content != "segment" && part.content != "word")
      bad_param(name.c_str(), "timestamp_granularities: each is 'segment' or 'word', got '" + part.content + "'");
    if (part.content == "word") o.word_timestamps = true;
  }
  if (o.word_timestamps && format != "verbose_json")
    bad_param("timestamp_granularities[]", "word timestamps come with response_format verbose_json");
  o.task = task;
  o.beam_size = cx.opt.beam_size;
  o.best_of = cx.opt.best_of;
  if (auto lang = field(req, "language")) o.language = *lang;
  if (auto prompt = field(req, "prompt")) o.initial_prompt = *prompt;
  if (auto t = field(req, "temperature")) {
    char* end = nullptr;
    const double v = std::strtod(t->c_str(), &end);
    if (t->empty() || end != t->c_str() + t->size() || !(v >= 0.0 && v <= 1.0))
      bad_param("temperature", "temperature must be a number in [0, 1]");
    if (v > 0) o.temperatures = {v};  // 0: the fallback ladder, as OpenAI's API does
  }
  AudioReadOptions ro;
  ro.sample_rate = cx.lm.audio_features->options().sample_rate;
  ro.max_seconds = static_cast<double>(cx.opt.max_audio_seconds);
  const std::string where = upload.filename.empty() ? "file" : upload.filename;
  Audio audio;
  try {
    audio = decode_audio(std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(upload.content.data()),
                                                       upload.content.size()),
                         where, ro);
  } catch (const Error& e) {
    throw ApiError(400, "invalid_request_error", "invalid_audio", e.what(), "file");
  }
  Transcript t;
  // (Word timestamps read the alignment heads' cross-attention, which a split model's ranks
  // put together: tfm/attention_map.h.)
  const ModelJob job = transcribe_job(audio, o);
  cx.sched.run_job([&] {
    JobContext jobs = cx.jobs();
    t = run_model_job(jobs, job).transcript;
  }, &job);
  std::int64_t tokens = 0;
  for (const auto& s : t.segments) tokens += static_cast<std::int64_t>(s.tokens.size());
  access_info().completion_tokens = tokens;
  const std::size_t a = t.text.find_first_not_of(' '), z = t.text.find_last_not_of(" \n");
  const std::string text = a == std::string::npos ? "" : t.text.substr(a, z - a + 1);
  if (format == "json") {
    send_json(res, {{"text", text}, {"usage", {{"type", "duration"}, {"seconds", std::ceil(t.seconds)}}}});
  } else if (format == "verbose_json") {
    Json j = Json::parse(format_transcript(t, "verbose_json", task));
    j["usage"] = {{"type", "duration"}, {"seconds", std::ceil(t.seconds)}};
    send_json(res, j);
  } else if (format == "text") {
    res.set_content(text + "\n", "text/plain; charset=utf-8");
  } else {
    res.set_content(format_transcript(t, format), format == "srt" ? "application/x-subrip; charset=utf-8" : "text/vtt; charset=utf-8");
  }
}

}  // namespace

void add_audio_routes(RouteTable& routes, ServerContext& cx) {
  const auto limit = static_cast<std::size_t>(cx.opt.max_upload_bytes);
  routes.post("/v1/audio/transcriptions",
              guarded([&cx](const httplib::Request& req, httplib::Response& res) { audio_route(cx, req, res, "transcribe"); }),
              limit, "--max-upload-bytes");
  routes.post("/v1/audio/translations",
              guarded([&cx](const httplib::Request& req, httplib::Response& res) { audio_route(cx, req, res, "translate"); }),
              limit, "--max-upload-bytes");
}

}  // namespace tfm::server
