// tfm index build -m ENCODER --input FILE -o DIR [--type flat|hnsw|ivfpq] [--add]
//   embeds a corpus (.txt lines or .jsonl "text"/"id") into an index directory (tfm/retrieval.h):
//   a progress line on stderr, resumable after an interruption, --add for more passages.
// tfm index search DIR -k K [--json] QUERY...
//   the K nearest passages of each query with their ids and scores (--json: one object a hit).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "commands.h"
#include "tfm/error.h"
#include "tfm/retrieval.h"

namespace tfm::cli {

namespace {

void add_build(CLI::App& index) {
  auto* cmd = index.add_subcommand("build", "Embed a corpus with an encoder and index it (FAISS)");
  struct Args {
    std::string model, input, out, type = "flat", prompt, prompt_name;
    WeightOptions weights;
    IndexSettings settings;
    std::int64_t batch = 32, checkpoint = 1024;
    bool add = false, quiet = false;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("-m,--model", a->model, "The encoder (a sentence-transformers or any model directory)")->required();
  cmd->add_option("--input", a->input, "Corpus: .jsonl (\"text\", \"id\") or one passage a line")->required();
  cmd->add_option("-o,--out", a->out, "Index directory (created)")->required();
  cmd->add_option("--type", a->type, "flat (exact) | hnsw | ivfpq")->check(CLI::IsMember({"flat", "hnsw", "ivfpq"}));
  cmd->add_flag("--add", a->add, "Add the passages to an existing index");
  cmd->add_option("--batch", a->batch, "Passages a forward pass")->check(CLI::Range(1, 4096));
  cmd->add_option("--checkpoint", a->checkpoint, "Passages between checkpoints (an interrupted build resumes from the last)")
      ->check(CLI::Range(1, 1 << 30));
  cmd->add_option("--prompt", a->prompt, "Text put before each passage");
  cmd->add_option("--prompt-name", a->prompt_name, "One of the encoder's prompts (e.g. \"document\")");
  cmd->add_option("--hnsw-m", a->settings.hnsw_m, "HNSW: links a node (default 32)")->check(CLI::Range(2, 512));
  cmd->add_option("--ef-construction", a->settings.ef_construction, "HNSW: candidates while building (default 80)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--ef-search", a->settings.ef_search, "HNSW: candidates while searching (default 128)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--nlist", a->settings.nlist, "IVF-PQ: lists (default ~4 sqrt(n))")->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--pq-m", a->settings.pq_m, "IVF-PQ: sub-vectors (default dimension / 2)")->check(CLI::Range(1, 4096));
  cmd->add_option("--nprobe", a->settings.nprobe, "IVF-PQ: lists searched (default nlist / 4)")->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--refine", a->settings.refine, "IVF-PQ: re-rank the top refine x k exactly (default 10)")
      ->check(CLI::Range(1, 1024));
  add_weight_options(cmd, a->weights);
  cmd->add_flag("-q,--quiet", a->quiet, "No progress line");
  cmd->callback([a] {
    const std::vector<Passage> passages = read_passages(a->input);
    LoadedModel enc = load_model(a->model, "", a->weights, "", 0, a->batch);
    IndexBuildOptions o;
    o.type = index_type_from_name(a->type);
    o.settings = a->settings;
    o.batch = a->batch;
    o.checkpoint = a->checkpoint;
    o.add = a->add;
    o.embed.prompt = a->prompt;
    o.embed.prompt_name = a->prompt_name;
    if (!a->quiet) {
      // On a terminal one line rewritten in place; into a file or pipe a line every 10 s.
      const bool tty = isatty(2) != 0;
      auto last = std::make_shared<std::chrono::steady_clock::time_point>();
      o.progress = [tty, last](std::int64_t done, std::int64_t total) {
        const auto now = std::chrono::steady_clock::now();
        if (done != total && now - *last < std::chrono::milliseconds(tty ? 200 : 10000)) return;
        *last = now;
        std::fprintf(stderr, tty ? "\rembedding: %lld / %lld passages%s" : "embedding: %lld / %lld passages%s\n",
                     static_cast<long long>(done), static_cast<long long>(total), tty && done == total ? "\n" : "");
      };
    }
    const IndexReport r = build_index(enc, a->model, passages, a->out, o);
    std::printf("%s: %lld passages (%lld added%s), %s, recall@10 %.3f against exact search, %.3f ms a query\n",
                a->out.c_str(), static_cast<long long>(r.count), static_cast<long long>(r.added),
                r.resumed_from > 0 ? (", resumed after " + std::to_string(r.resumed_from)).c_str() : "", a->type.c_str(),
                r.recall_at_10, r.query_ms);
  });
}

void add_search(CLI::App& index) {
  auto* cmd = index.add_subcommand("search", "The nearest passages of each query");
  struct Args {
    std::string dir, model, prompt, prompt_name;
    std::vector<std::string> queries;
    WeightOptions weights;
    std::int64_t k = 5;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("dir", a->dir, "Index directory")->required();
  cmd->add_option("queries", a->queries, "Query texts (default: each line of stdin)");
  cmd->add_option("-k", a->k, "Passages a query")->check(CLI::Range(1, 10000));
  cmd->add_option("-m,--model", a->model, "The encoder (default: the one index.json names)");
  cmd->add_option("--prompt", a->prompt, "Text put before each query (e.g. \"query: \")");
  cmd->add_option("--prompt-name", a->prompt_name, "One of the encoder's prompts (e.g. \"query\")");
  cmd->add_flag("--json", a->json, "One JSON object a hit: query, rank, id, text, score");
  add_weight_options(cmd, a->weights);
  cmd->callback([a] {
    const PassageIndex idx = PassageIndex::open(a->dir);
    LoadedModel enc = load_model(a->model.empty() ? idx.encoder_path() : a->model, "", a->weights);
    idx.check_encoder(enc);
    std::vector<std::string> queries = a->queries;
    if (queries.empty()) queries = read_input_lines("-");
    EmbedOptions eo;
    eo.prompt = a->prompt;
    eo.prompt_name = a->prompt_name;
    const auto hits = idx.search(enc, queries, a->k, eo);
    for (std::size_t q = 0; q < queries.size(); ++q) {
      if (!a->json) std::printf("%s\n", queries[q].c_str());
      for (std::size_t r = 0; r < hits[q].size(); ++r) {
        const SearchHit& h = hits[q][r];
        if (a->json)
          std::printf("%s\n", nlohmann::json{{"query", queries[q]}, {"rank", r + 1}, {"id", h.id}, {"index", h.index},
                                             {"text", h.text}, {"score", h.score}}
                                  .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                                  .c_str());
        else
          std::printf("  %zu. [%s] %.4f  %s\n", r + 1, h.id.c_str(), static_cast<double>(h.score), h.text.c_str());
      }
    }
  });
}

}  // namespace

void add_index_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("index", "Vector indexes of passages for retrieval (build, search)");
  cmd->require_subcommand(1);
  add_build(*cmd);
  add_search(*cmd);
}

}  // namespace tfm::cli
