// tfm generate -m DIR -p TEXT [-n N] [--temp T] [--top-k K] [--top-p P] [--min-p P]
//              [--repeat-penalty R] [--seed S] [--ctx-size C] [--stop STR] [--beam K]
//              [--json-schema FILE | --grammar FILE] [--draft-model DIR | --lookup] [--draft N]
//              [--retrieve INDEX_DIR [-k K] [--retrieve-template FILE]] [--tensor-parallel N | --pipeline-parallel N]
// Streams the continuation of a prompt to stdout as it is generated (llama.cpp's flags).
// --file FILE generates for every line of FILE together (batched) and prints JSON lines.
// mpirun -np N tfm generate ... --tensor-parallel N: each rank holds 1/N of the heads and FFN;
// --pipeline-parallel N: each rank holds a stage of the layers.
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli_common.h"
#include "commands.h"
#include "tfm/error.h"
#include "tfm/grammar.h"
#include "tfm/load.h"
#include "tfm/safetensors.h"
#include "tfm/model_dir.h"
#include "tfm/retrieval.h"
#include "tfm/session.h"

namespace tfm::cli {

void add_generate_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("generate", "Continue a prompt with a decoder-only model (streams to stdout)");
  struct Args {
    std::string model, adapter, prompt, file, max_memory, json_schema, grammar, draft_model, draft_dtype;
    std::string retrieve, retrieve_template;
    std::int64_t retrieve_k = 3;
    std::int64_t draft = 8, ngram = 3;
    bool lookup = false;
    WeightOptions weights;
    std::string cache_type = "f32";
    std::int64_t n = 128, ctx = 0, top_k = 40, repeat_last_n = 64, beam = 1, n_best = 1, batch = 8;
    double temp = 0.8, top_p = 0.95, min_p = 0.05, repeat_penalty = 1.0;
    std::int64_t seed = -1;
    ModelParallel parallel;
    std::vector<std::string> stop;
    bool ignore_eos = false, no_prompt = false, verbose = false, no_shift = false;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("-m,--model", a->model, "Model directory (config.json, model.safetensors, tokenizer.json)")->required();
  add_adapter_option(cmd, a->adapter);
  add_weight_options(cmd, a->weights);
  cmd->add_option("--cache-type", a->cache_type, "KV cache type: f32, f16 or q8_0")
      ->check(CLI::IsMember({"f32", "f16", "q8_0"}));
  cmd->add_option("-p,--prompt", a->prompt, "Prompt text");
  cmd->add_option("--file", a->file, "Generate for each line of this file (batched); prints JSON lines");
  cmd->add_option("-n,--n-predict", a->n, "Tokens to generate at most")->check(CLI::NonNegativeNumber);
  cmd->add_option("-c,--ctx-size", a->ctx, "Context size: prompt + generated tokens (0: the model's)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--temp", a->temp, "Temperature (0: greedy)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-k", a->top_k, "Keep the k most likely tokens (0: off)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--top-p", a->top_p, "Nucleus: smallest set with this much probability (1: off)");
  cmd->add_option("--min-p", a->min_p, "Drop tokens below min-p x the top probability (0: off)");
  cmd->add_option("--repeat-penalty", a->repeat_penalty, "Penalise recent tokens (1: off)");
  cmd->add_option("--repeat-last-n", a->repeat_last_n, "Recent tokens the penalty sees");
  cmd->add_option("-s,--seed", a->seed, "Random seed (-1: from the clock; printed with --verbose)");
  cmd->add_option("--stop", a->stop, "Stop before this string (repeatable)");
  cmd->add_option("--beam", a->beam, "Beam search with this many beams instead of sampling")->check(CLI::PositiveNumber);
  cmd->add_option("--n-best", a->n_best, "Beam search: print this many best continuations")->check(CLI::PositiveNumber);
  cmd->add_option("-b,--batch", a->batch, "--file: sequences decoded together")->check(CLI::PositiveNumber);
  cmd->add_option("--json-schema", a->json_schema, "Constrain the output to JSON matching this JSON Schema file");
  cmd->add_option("--grammar", a->grammar, "Constrain the output to this GBNF grammar file (llama.cpp's syntax)");
  cmd->add_option("--draft-model", a->draft_model, "Speculative decoding: a smaller model with the same vocabulary drafts tokens");
  cmd->add_option("--draft-dtype", a->draft_dtype, "--draft-model's weight type at load (default: --dtype's); the model itself may be its draft at q4_0");
  cmd->add_flag("--lookup", a->lookup, "Speculative decoding: draft the tokens that followed the text's last n-gram earlier (prompt lookup)");
  cmd->add_option("--draft", a->draft, "Speculative decoding: the longest draft (it adapts below this)")->check(CLI::Range(1, 64));
  cmd->add_option("--lookup-ngram", a->ngram, "--lookup: the longest n-gram matched")->check(CLI::Range(1, 16));
  cmd->add_option("--retrieve", a->retrieve, "An index directory (tfm index build): its nearest passages go before the prompt");
  cmd->add_option("-k", a->retrieve_k, "--retrieve: passages put in the prompt")->check(CLI::Range(1, 100));
  cmd->add_option("--retrieve-template", a->retrieve_template,
                  "--retrieve: a Jinja file over `documents` (id, text, score) and `prompt` (default: numbered passages, then the prompt)");
  cmd->add_flag("--ignore-eos", a->ignore_eos, "Keep generating past <eos>");
  cmd->add_flag("--no-context-shift", a->no_shift, "Stop when the context is full (default: keep its last half)");
  cmd->add_flag("--no-display-prompt", a->no_prompt, "Do not echo the prompt");
  cmd->add_flag("-v,--verbose", a->verbose, "Print model, cache and timing figures to stderr");
  add_max_memory_option(cmd, a->max_memory);
  add_model_parallel_options(cmd, a->parallel);
  cmd->callback([a, cmd] { run_model_parallel(a->parallel, [a, cmd] {
    const bool has_prompt = cmd->count("--prompt") > 0;
    TFM_CHECK(has_prompt != !a->file.empty(), "generate", "give either -p TEXT or --file FILE");
    TFM_CHECK(a->file.empty() || (a->beam == 1 && a->n_best == 1), "generate",
              "--beam/--n-best work on one prompt (-p); --file samples or decodes greedily");
    // No flag is taken and ignored: those that shape sampling do nothing to a beam search, and
    // --batch sizes --file's batches only.
    if (cmd->count("--beam") + cmd->count("--n-best") > 0)
      for (const char* f : {"--temp", "--top-k", "--top-p", "--min-p", "--repeat-penalty", "--repeat-last-n", "--seed",
                            "--stop", "--no-context-shift"})
        TFM_CHECK(cmd->count(f) == 0, f, "does not apply to beam search (--beam/--n-best)");
    TFM_CHECK(cmd->count("--batch") == 0 || !a->file.empty(), "--batch", "sizes --file's batches; give --file");
    TFM_CHECK(a->json_schema.empty() || a->grammar.empty(), "generate", "give --json-schema or --grammar, not both");
    const bool speculative = !a->draft_model.empty() || a->lookup;
    TFM_CHECK(a->draft_model.empty() || !a->lookup, "generate", "give --draft-model or --lookup, not both");
    TFM_CHECK(!speculative || (a->file.empty() && cmd->count("--beam") + cmd->count("--n-best") == 0 && a->json_schema.empty() &&
                               a->grammar.empty()),
              "generate", "speculative decoding (--draft-model/--lookup) works on one prompt (-p), sampled or greedy, without a grammar");
    TFM_CHECK(speculative || (cmd->count("--draft") + cmd->count("--lookup-ngram") == 0), "--draft", "give --draft-model or --lookup");
    TFM_CHECK(a->draft_dtype.empty() || !a->draft_model.empty(), "--draft-dtype", "give --draft-model");
    TFM_CHECK((a->json_schema.empty() && a->grammar.empty()) || (cmd->count("--beam") + cmd->count("--n-best") == 0), "generate",
              "--json-schema/--grammar constrain sampling; beam search (--beam/--n-best) does not take them");
    // The grammar is read and checked before the model loads: a bad one fails fast.
    std::shared_ptr<const Grammar> grammar;
    if (!a->json_schema.empty()) grammar = std::make_shared<const Grammar>(Grammar::from_json_schema(read_file(a->json_schema), a->json_schema));
    if (!a->grammar.empty()) grammar = std::make_shared<const Grammar>(Grammar::parse(read_file(a->grammar), a->grammar));
    // --retrieve: the index and its encoder, opened and checked before the model loads.
    TFM_CHECK(!a->retrieve.empty() || cmd->count("-k") + cmd->count("--retrieve-template") == 0, "-k",
              "-k and --retrieve-template go with --retrieve");
    std::optional<PassageIndex> index;
    std::optional<LoadedModel> retriever;
    const std::string rtemplate = a->retrieve_template.empty() ? default_retrieval_template() : read_file(a->retrieve_template);
    if (!a->retrieve.empty()) {
      index.emplace(PassageIndex::open(a->retrieve));
      retriever.emplace(load_model(index->encoder_path(), ""));
      index->check_encoder(*retriever);
    }
    auto augment = [&](const std::string& text) {
      if (!index) return text;
      const auto hits = index->search(*retriever, {text}, a->retrieve_k)[0];
      if (a->verbose)
        for (const SearchHit& h : hits) std::fprintf(stderr, "retrieved [%s] %.4f\n", h.id.c_str(), static_cast<double>(h.score));
      return retrieval_prompt(text, hits, rtemplate);
    };
    if (has_prompt) a->prompt = augment(a->prompt);
    const auto load_start = std::chrono::steady_clock::now();
    LoadedModel lm = load_model(a->model, a->adapter, a->weights, a->max_memory, a->ctx,
                                a->file.empty() ? std::max(a->beam, std::int64_t{1}) : a->batch, a->parallel);
    if (a->verbose)
      std::fprintf(stderr, "tfm: model loaded in %.3f s\n",
                   std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count());
    // The flags given win; a hub directory's generation_config.json sets what they leave out
    // (tfm/load.h), then the flags' defaults.
    const auto given = [&](const char* flag) { return cmd->count(flag) > 0; };
    auto flag = [&](const char* name, auto value) { return given(name) ? std::optional(value) : std::nullopt; };
    DecodeRequest asked;
    asked.temperature = flag("--temp", a->temp);
    asked.top_k = flag("--top-k", a->top_k);
    asked.top_p = flag("--top-p", a->top_p);
    asked.min_p = flag("--min-p", a->min_p);
    asked.repeat_penalty = flag("--repeat-penalty", a->repeat_penalty);
    asked.max_new_tokens = flag("--n-predict", a->n);
    asked.num_beams = given("--file") || grammar ? std::optional<std::int64_t>(1) : flag("--beam", a->beam);
    const DecodeRequest defaults{a->temp, a->top_p, a->min_p, a->repeat_penalty, 1.0, a->top_k, a->n, a->beam, true};
    const std::int64_t prompt_tokens = has_prompt ? static_cast<std::int64_t>(lm.tokenizer.encode(a->prompt).size()) : -1;
    const Decoding d = plan_decoding(lm, asked, defaults, prompt_tokens);
    a->beam = d.num_beams;
    SessionOptions so;
    so.cache_type = dtype_from_name(a->cache_type);
    so.ctx_size = a->ctx;
    so.max_batch = a->file.empty() ? std::max(a->beam, std::int64_t{1}) : a->batch;
    Generator gen(lm.model, lm.tokenizer, so);
    report_model(a->model, lm, gen.cache(), a->verbose);
    GenerateOptions o = d.generate;
    o.stop = a->stop;
    o.stop_at_eos = !a->ignore_eos;
    o.context_shift = !a->no_shift;
    o.grammar = grammar;
    o.sampling.repeat_last_n = a->repeat_last_n;
    o.sampling.seed = same_on_every_rank(
        a->seed >= 0 ? static_cast<std::uint64_t>(a->seed)
                     : static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()),
        a->parallel);
    if (a->verbose) std::fprintf(stderr, "seed %llu\n", static_cast<unsigned long long>(o.sampling.seed));

    if (!a->file.empty()) {
      const auto lines = read_input_lines(a->file, a->parallel);
      std::vector<std::string> prompts;
      for (const auto& l : lines) prompts.push_back(augment(l));
      const auto results = gen.generate_batch(prompts, o);
      for (std::size_t i = 0; i < results.size(); ++i) {
        nlohmann::json j;
        j["prompt"] = lines[i];
        j["text"] = results[i].text;
        j["stop_reason"] = results[i].stop_reason;
        std::printf("%s\n", j.dump().c_str());
      }
    } else if (a->beam > 1 || a->n_best > 1) {
      check_utf8(a->prompt, "-p");
      BeamOptions b = d.beam;
      b.beam_size = std::max(a->beam, a->n_best);
      b.n_best = a->n_best;
      if (a->ignore_eos) b.eos_id = -1, b.more_eos_ids.clear();
      const auto hyps = gen.beam(a->prompt, b);
      for (std::size_t i = 0; i < hyps.size(); ++i) {
        const std::string text = gen.decode(hyps[i].tokens);
        if (hyps.size() == 1) std::printf("%s%s\n", a->no_prompt ? "" : a->prompt.c_str(), text.c_str());
        else std::printf("%zu\t%.4f\t%s%s\n", i + 1, hyps[i].score, a->no_prompt ? "" : a->prompt.c_str(), text.c_str());
      }
    } else {
      check_utf8(a->prompt, "-p");
      gen.encode_prompt(a->prompt);  // a bad prompt fails before anything is printed
      if (!a->no_prompt) std::fputs(a->prompt.c_str(), stdout);
      std::fflush(stdout);
      const auto print = [](std::string_view piece) {
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
      };
      SpeculativeStats stats;
      std::optional<LoadedModel> draft;
      if (!a->draft_model.empty()) {
        WeightOptions dw = a->weights;
        if (!a->draft_dtype.empty()) dw = {a->draft_dtype, ""};
        draft.emplace(load_model(a->draft_model, "", dw, "", a->ctx, 1));
        TFM_CHECK(draft->tokenizer.vocab_size() == lm.tokenizer.vocab_size(), "--draft-model", "its tokenizer has ",
                  draft->tokenizer.vocab_size(), " tokens; the model's has ", lm.tokenizer.vocab_size());
      }
      SpeculativeOptions spec;
      spec.draft = draft ? &draft->model : nullptr;
      spec.max_draft = a->draft;
      spec.ngram = a->ngram;
      const auto r = speculative ? gen.generate_speculative(a->prompt, o, spec, print, &stats) : gen.generate(a->prompt, o, print);
      std::fputc('\n', stdout);
      std::fflush(stdout);
      if (a->verbose) std::fprintf(stderr, "stopped: %s after %zu tokens\n", r.stop_reason.c_str(), r.tokens.size());
      if (a->verbose && speculative)
        std::fprintf(stderr, "speculative: %lld rounds, %lld drafted, %lld accepted (%.1f%%)\n", static_cast<long long>(stats.rounds),
                     static_cast<long long>(stats.drafted), static_cast<long long>(stats.accepted),
                     stats.drafted > 0 ? 100.0 * static_cast<double>(stats.accepted) / static_cast<double>(stats.drafted) : 0.0);
    }
    if (a->verbose) report_timings(gen.timings());
  }); });
}

}  // namespace tfm::cli
