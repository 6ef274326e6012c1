// tfm translate -m DIR [--beam K] [--n-best N] [--retrieve INDEX -k K] [--tensor-parallel N] [TEXT]
// Translates TEXT, or every line of stdin (one output line per input line, written as soon as
// its batch is done). --n-best N > 1 prints N lines per input: rank<TAB>score<TAB>text.
// --retrieve: Fusion-in-Decoder over the index's K nearest passages of each input: every
// passage joined with the input by --retrieve-template (Jinja over `prompt` and `document`:
// id, text, score; default "question: {{ prompt }} context: {{ document.text }}"), each encoded
// apart, the decoder reading them all (Translator::translate_fused). A model trained so
// (data.fusion) keeps its index and template in its directory (fusion.json): they are the
// defaults, and --no-retrieve translates from the input alone.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "cli_common.h"
#include "commands.h"
#include "tfm/error.h"
#include "tfm/load.h"
#include "tfm/model_dir.h"
#include "tfm/retrieval.h"
#include "tfm/safetensors.h"
#include "tfm/session.h"

namespace tfm::cli {

void add_translate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("translate", "Translate text with an encoder-decoder model (stdin lines when no TEXT)");
  struct Args {
    std::string model, adapter, text;
    WeightOptions weights;
    std::string cache_type = "f32";
    std::int64_t beam = 4, n_best = 1, max_tokens = 0, batch = 16, ctx = 0;
    double length_penalty = 1.0;
    std::string lp_form = "hf", max_memory, retrieve, retrieve_template;
    std::int64_t retrieve_k = 3;
    ModelParallel parallel;
    bool verbose = false, no_retrieve = false;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("-m,--model", a->model, "Model directory")->required();
  add_adapter_option(cmd, a->adapter);
  add_weight_options(cmd, a->weights);
  cmd->add_option("--cache-type", a->cache_type, "KV cache type: f32, f16 or q8_0")
      ->check(CLI::IsMember({"f32", "f16", "q8_0"}));
  cmd->add_option("text", a->text, "Sentence to translate (default: each line of stdin)");
  cmd->add_option("--beam", a->beam, "Beam size (1: greedy, batched)")->check(CLI::PositiveNumber);
  cmd->add_option("--n-best", a->n_best, "Translations to print per input")->check(CLI::PositiveNumber);
  cmd->add_option("--length-penalty", a->length_penalty, "Length penalty alpha (0: none)");
  cmd->add_option("--lp", a->lp_form, "Length penalty form: hf (len^a) or gnmt (((5+len)/6)^a)")
      ->check(CLI::IsMember({"hf", "gnmt"}));
  cmd->add_option("-n,--max-tokens", a->max_tokens, "Target tokens at most (0: the context size)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("-b,--batch", a->batch, "Greedy: sentences decoded together")->check(CLI::PositiveNumber);
  cmd->add_option("-c,--ctx-size", a->ctx, "Target context size (0: the model's)")->check(CLI::NonNegativeNumber);
  cmd->add_flag("-v,--verbose", a->verbose, "Print model, cache and timing figures to stderr");
  cmd->add_option("--retrieve", a->retrieve, "Fusion-in-Decoder over this index's nearest passages (tfm index build)");
  cmd->add_option("-k", a->retrieve_k, "--retrieve: passages read with each input")->check(CLI::Range(1, 100));
  cmd->add_option("--retrieve-template", a->retrieve_template,
                  "--retrieve: a Jinja file joining `prompt` and one `document` (default: question: ... context: ...)");
  cmd->add_flag("--no-retrieve", a->no_retrieve, "A Fusion-in-Decoder model (fusion.json) translating from the input alone");
  add_max_memory_option(cmd, a->max_memory);
  add_model_parallel_options(cmd, a->parallel);
  cmd->callback([a, cmd] { run_model_parallel(a->parallel, [a, cmd] {
    std::string part_template = default_fusion_template();
    // A model trained to read passages (tfm train's data.fusion): its index, k and template.
    const std::string fusion_path = (std::filesystem::path(a->model) / "fusion.json").string();
    if (!a->no_retrieve && std::filesystem::is_regular_file(fusion_path)) {
      nlohmann::json f;
      try {
        f = nlohmann::json::parse(read_file(fusion_path));
      } catch (const nlohmann::json::exception& e) {
        fail(fusion_path, "not valid JSON: ", e.what());
      }
      TFM_CHECK(f.contains("index") && f["index"].is_string() && f.contains("k") && f["k"].is_number_integer() &&
                    f.contains("template") && f["template"].is_string(),
                fusion_path, "needs \"index\" (a folder name), \"k\" (an integer) and \"template\" (Jinja)");
      if (a->retrieve.empty()) a->retrieve = (std::filesystem::path(a->model) / f["index"].get<std::string>()).string();
      if (cmd->count("-k") == 0) a->retrieve_k = f["k"].get<std::int64_t>();
      part_template = f["template"].get<std::string>();
    } else {
      TFM_CHECK(!a->retrieve.empty() || cmd->count("-k") + cmd->count("--retrieve-template") == 0, "-k",
                "-k and --retrieve-template go with --retrieve");
    }
    TFM_CHECK(!a->no_retrieve || a->retrieve.empty(), "--no-retrieve", "and --retrieve exclude each other");
    std::optional<PassageIndex> index;
    std::optional<LoadedModel> retriever;
    if (!a->retrieve_template.empty()) part_template = read_file(a->retrieve_template);
    if (!a->retrieve.empty()) {
      index.emplace(PassageIndex::open(a->retrieve));
      retriever.emplace(load_model(index->encoder_path(), ""));
      index->check_encoder(*retriever);
    }
    LoadedModel lm = load_model(a->model, a->adapter, a->weights, a->max_memory, a->ctx, a->beam > 1 || a->n_best > 1 ? std::max(a->beam, a->n_best) : a->batch,
                                a->parallel);
    // The flags given win; generation_config.json (hub directories) sets what they leave out
    // (tfm/load.h), then the flags' defaults.
    auto flag = [&](const char* name, auto value) { return cmd->count(name) > 0 ? std::optional(value) : std::nullopt; };
    DecodeRequest asked;
    asked.num_beams = flag("--beam", a->beam);
    asked.length_penalty = flag("--length-penalty", a->length_penalty);
    asked.max_new_tokens = flag("--max-tokens", a->max_tokens);
    DecodeRequest defaults{0.0, 1.0, 0.0, 1.0, a->length_penalty, 0, a->max_tokens, a->beam, true};
    const Decoding d = plan_decoding(lm, asked, defaults, -1);
    TFM_CHECK(cmd->count("--batch") == 0 || (d.num_beams == 1 && a->n_best == 1), "--batch",
              "batches greedy decoding only; beam search translates one sentence at a time");
    TFM_CHECK(cmd->count("--lp") == 0 || d.num_beams > 1 || a->n_best > 1, "--lp",
              "is the length penalty's form: it applies to beam search (--beam > 1)");
    BeamOptions b = d.beam;
    b.beam_size = std::max(d.num_beams, a->n_best);
    b.n_best = a->n_best;
    b.penalty_form = a->lp_form == "gnmt" ? LengthPenalty::gnmt : LengthPenalty::hf;
    b.max_new_tokens = b.max_new_tokens > 0 ? b.max_new_tokens : lm.config.max_positions;
    SessionOptions so;
    so.cache_type = dtype_from_name(a->cache_type);
    so.ctx_size = a->ctx;
    so = session_for(lm, so);
    so.max_batch = b.beam_size > 1 ? b.beam_size : a->batch;
    if (index) so.max_source = a->retrieve_k * lm.config.max_positions;  // k parts, each up to the model's positions
    Translator tr(lm.model, lm.tokenizer, so);
    // The inputs as Fusion-in-Decoder reads them: one encoder part per retrieved passage.
    auto translate = [&](const std::vector<std::string>& texts) {
      if (!index) return tr.translate(texts, b);
      std::vector<std::vector<std::vector<std::int32_t>>> examples;
      const auto hits = index->search(*retriever, texts, a->retrieve_k);
      for (std::size_t i = 0; i < texts.size(); ++i) {
        std::vector<std::vector<std::int32_t>> parts;
        for (const SearchHit& h : hits[i]) {
          parts.push_back(tr.encode_source(fusion_part(texts[i], h, part_template)));
          if (a->verbose) std::fprintf(stderr, "retrieved [%s] %.4f\n", h.id.c_str(), static_cast<double>(h.score));
        }
        examples.push_back(std::move(parts));
      }
      return tr.translate_fused(examples, b);
    };
    report_model(a->model, lm, tr.cache(), a->verbose);
    auto print = [&](const TranslateResult& r) {
      if (r.texts.size() == 1) std::printf("%s\n", r.texts[0].c_str());
      else
        for (std::size_t i = 0; i < r.texts.size(); ++i)
          std::printf("%zu\t%.4f\t%s\n", i + 1, r.hypotheses[i].score, r.texts[i].c_str());
      std::fflush(stdout);
    };
    if (!a->text.empty()) {
      check_utf8(a->text, "TEXT");
      print(translate({a->text})[0]);
    } else {
      const auto lines = read_input_lines("-", a->parallel);
      const std::size_t chunk = static_cast<std::size_t>(b.beam_size > 1 ? 1 : a->batch);
      for (std::size_t i = 0; i < lines.size(); i += chunk) {
        const std::vector<std::string> part(lines.begin() + static_cast<std::ptrdiff_t>(i),
                                            lines.begin() + static_cast<std::ptrdiff_t>(std::min(lines.size(), i + chunk)));
        for (const auto& r : translate(part)) print(r);
      }
    }
    if (a->verbose) report_timings(tr.timings());
  }); });
}

}  // namespace tfm::cli
