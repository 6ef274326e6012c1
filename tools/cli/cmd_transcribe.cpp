// tfm transcribe -m DIR AUDIO... — speech to text with a Whisper-style model (docs/speech.md):
// txt (one line per segment), srt, vtt or json (OpenAI's verbose_json shape, with the words'
// times under --word-timestamps); progress on stderr for audio longer than one window.
// tfm mel AUDIO -o OUT.npy — the log-mel features the model would read (float32 [n_mels, frames]).
// tfm wer REF HYP — word and character error rates (jiwer's definitions).
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "commands.h"
#include "tfm/audio.h"
#include "tfm/error.h"
#include "tfm/metrics.h"
#include "tfm/transcribe.h"

namespace tfm::cli {
void add_transcribe_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("transcribe", "Transcribe (or translate) speech with a Whisper-style model");
  struct Args {
    std::string model, language, task = "transcribe", format = "txt";
    std::vector<std::string> audio;
    WeightOptions weights;
    bool no_timestamps = false, no_condition = false, verbose = false, word_timestamps = false;
    std::vector<double> temperatures;
    double no_speech = 0.6, logprob = -1.0, compression = 2.4;
    std::uint64_t seed = 0;
    std::int64_t beam_size = 5, best_of = 5;
    double ctc_weight = 0;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("-m,--model", a->model, "Model directory (Whisper's hub layout)")->required();
  add_weight_options(cmd, a->weights);
  cmd->add_option("audio", a->audio, "Audio files (WAV, FLAC, OGG, MP3, ...; any rate and channels)")->required();
  cmd->add_option("--language", a->language, "Spoken language code (en, de, ...) or auto (default: detect)");
  cmd->add_option("--task", a->task, "transcribe, or translate into English")->check(CLI::IsMember({"transcribe", "translate"}));
  cmd->add_option("--format", a->format, "txt, srt, vtt or json")->check(CLI::IsMember({"txt", "srt", "vtt", "json"}));
  cmd->add_flag("--no-timestamps", a->no_timestamps, "Decode without timestamps (one segment per 30-s window)");
  cmd->add_flag("--word-timestamps", a->word_timestamps,
                "Time each word (alignment heads' cross-attention + DTW); json lists them, -v prints them");
  cmd->add_option("--temperature", a->temperatures, "Temperatures to try in turn (default 0 0.2 0.4 0.6 0.8 1)");
  cmd->add_option("--no-speech-threshold", a->no_speech, "A window this likely silent (and improbable) is skipped");
  cmd->add_option("--logprob-threshold", a->logprob, "Mean log-probability below which a window is decoded again hotter");
  cmd->add_option("--compression-ratio-threshold", a->compression, "gzip ratio above which a window is decoded again hotter");
  cmd->add_flag("--no-condition-on-previous-text", a->no_condition, "Do not prompt each window with the text before it");
  cmd->add_option("--beam-size", a->beam_size, "Beams at temperature 0 (1: greedy)")->check(CLI::Range(1, 16));
  cmd->add_option("--ctc-weight", a->ctc_weight,
                  "Joint CTC/attention decoding at temperature 0 for models trained with a CTC loss (training.ctc_weight): "
                  "the weight of the CTC prefix score (0: the decoder alone)")
      ->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--best-of", a->best_of, "Samples drawn at each temperature above 0")->check(CLI::Range(1, 16));
  cmd->add_option("--seed", a->seed, "Seed for the temperatures above 0");
  cmd->add_flag("-v,--verbose", a->verbose, "Segments on stderr as they complete");
  cmd->callback([a] {
    LoadedModel lm = load_model(a->model, "", a->weights);
    TFM_CHECK(lm.config.reads_audio(), a->model, "is not a speech model (no num_mel_bins): transcribe needs a Whisper-style model");
    Transcriber t(lm, a->beam_size);
    TranscribeOptions o;
    o.language = a->language;
    o.task = a->task;
    o.timestamps = !a->no_timestamps;
    o.word_timestamps = a->word_timestamps;
    if (!a->temperatures.empty()) o.temperatures = a->temperatures;
    o.no_speech_threshold = a->no_speech;
    o.logprob_threshold = a->logprob;
    o.compression_ratio_threshold = a->compression;
    o.condition_on_previous_text = !a->no_condition;
    o.seed = a->seed;
    o.beam_size = a->beam_size;
    o.best_of = a->best_of;
    o.ctc_weight = a->ctc_weight;
    AudioReadOptions ro;
    ro.sample_rate = lm.audio_features->options().sample_rate;
    for (const std::string& file : a->audio) {
      const Audio audio = read_audio(file, ro);
      const bool long_form = audio.seconds() > 30.0;
      const Transcript r = t.transcribe(
          audio, o,
          [&](const TranscriptSegment& s) {
            if (!a->verbose) return;
            std::fprintf(stderr, "[%8.2f --> %8.2f]%s\n", s.start, s.end, s.text.c_str());
            for (const WordTiming& w : s.words)
              std::fprintf(stderr, "    [%8.2f --> %8.2f]%s (%.2f)\n", w.start, w.end, w.word.c_str(), w.probability);
          },
          [&](double done, double total) {
            if (long_form) std::fprintf(stderr, "\r%s: %.0f / %.0f s", file.c_str(), done, total);
          });
      if (long_form) std::fprintf(stderr, "\n");
      if (a->audio.size() > 1 && a->format == "txt") std::printf("==> %s <==\n", file.c_str());
      std::fputs(format_transcript(r, a->format == "json" ? "verbose_json" : a->format, a->task).c_str(), stdout);
      if (a->format == "json") std::fputs("\n", stdout);
      std::fflush(stdout);
    }
  });

  auto* mel = app.add_subcommand("mel", "Write the log-mel features of an audio file as .npy (float32 [n_mels, frames])");
  struct MelArgs {
    std::string audio, out, model;
    std::int64_t n_mels = 80;
    bool window = false;
  };
  auto m = std::make_shared<MelArgs>();
  mel->add_option("audio", m->audio, "Audio file")->required();
  mel->add_option("-o,--output", m->out, "Output .npy file")->required();
  mel->add_option("-m,--model", m->model, "Take the front end from this model directory (preprocessor_config.json)");
  mel->add_option("--n-mels", m->n_mels, "Mel bins without -m (80, or 128 for large-v3)")->check(CLI::Range(1, 1024));
  mel->add_flag("--window", m->window, "Pad or cut to the model's 30-s window, as the model reads it");
  mel->callback([m] {
    const AudioFeatureExtractor fx = m->model.empty() ? AudioFeatureExtractor::whisper(m->n_mels)
                                                      : AudioFeatureExtractor::load(m->model, m->n_mels);
    AudioReadOptions ro;
    ro.sample_rate = fx.options().sample_rate;
    const Audio audio = read_audio(m->audio, ro);
    const Tensor f = m->window ? fx(audio.samples) : log_mel_spectrogram(audio.samples, fx.options());
    write_npy(m->out, f);
    std::fprintf(stderr, "%s: %.2f s at %lld Hz (%lld ch, %s) -> %s [%lld, %lld]\n", m->audio.c_str(), audio.seconds(),
                 static_cast<long long>(audio.source_rate), static_cast<long long>(audio.source_channels), audio.format.c_str(),
                 m->out.c_str(), static_cast<long long>(f.size(0)), static_cast<long long>(f.size(1)));
  });

  auto* wer = app.add_subcommand("wer", "Word and character error rates of a hypothesis file against references (= jiwer)");
  struct WerArgs {
    std::string ref, hyp = "-", normalize = "none";
    bool json = false;
  };
  auto w = std::make_shared<WerArgs>();
  wer->add_option("REF", w->ref, "Reference transcripts, one a line")->required();
  wer->add_option("HYP", w->hyp, "Hypotheses, one a line (default: stdin)");
  wer->add_option("--normalize", w->normalize, "none (jiwer's default) or basic (Whisper's BasicTextNormalizer)")
      ->check(CLI::IsMember({"none", "basic"}));
  wer->add_flag("--json", w->json, "One JSON object with the rates and the edit counts");
  wer->callback([w] {
    const std::vector<std::string> refs = read_input_lines(w->ref), hyps = read_input_lines(w->hyp);
    const auto how = w->normalize == "basic" ? metrics::TranscriptNormalizer::basic : metrics::TranscriptNormalizer::none;
    const metrics::ErrorRates r = metrics::error_rates(refs, hyps, how);
    if (w->json) {
      const auto counts = [](const metrics::ErrorCounts& c) {
        return nlohmann::json{{"rate", c.rate()}, {"hits", c.hits}, {"substitutions", c.substitutions},
                              {"deletions", c.deletions}, {"insertions", c.insertions}, {"reference", c.reference}};
      };
      std::printf("%s\n", nlohmann::json{{"wer", counts(r.words)}, {"cer", counts(r.chars)}, {"normalize", w->normalize}}.dump().c_str());
      return;
    }
    std::printf("WER %.2f%% (%lld words: %lld substitutions, %lld deletions, %lld insertions)\n", 100.0 * r.words.rate(),
                static_cast<long long>(r.words.reference), static_cast<long long>(r.words.substitutions),
                static_cast<long long>(r.words.deletions), static_cast<long long>(r.words.insertions));
    std::printf("CER %.2f%% (%lld characters)\n", 100.0 * r.chars.rate(), static_cast<long long>(r.chars.reference));
  });
}

}  // namespace tfm::cli
