// tfm serve -m DIR [--host H] [--port P] [--parallel N] [--ctx-size C] [--api-key K | --api-key-file F]
//           [--max-body-bytes B] [--timeout S] [--cors ORIGIN] — the OpenAI-compatible HTTP
// server (tools/server, docs/server.md). Under mpirun with --tensor-parallel / --pipeline-parallel
// rank 0 serves and the others repeat its batch steps (tools/server/lockstep.h).
#include <fstream>
#include <sstream>

#include <pthread.h>

#include <csignal>

#include "cli_common.h"
#include "commands.h"
#include "dist/comm.h"
#include "lockstep.h"
#include "server.h"
#include "tfm/error.h"

namespace tfm::cli {

void add_serve_command(CLI::App& app) {
  auto* cmd = app.add_subcommand("serve", "Serve a model over HTTP with OpenAI's API (continuous batching; docs/server.md)");
  struct Args {
    server::ServeOptions o;
    std::string adapter, api_key_file, max_memory;
    WeightOptions weights;
    ModelParallel model_parallel;
  };
  auto a = std::make_shared<Args>();
  cmd->add_option("-m,--model", a->o.model_dir, "Model directory")->required();
  add_adapter_option(cmd, a->adapter);
  cmd->add_option("--host", a->o.host, "Address to listen on (default 127.0.0.1: this machine only)");
  cmd->add_option("--port", a->o.port, "Port (0: any free port, printed)")->check(CLI::Range(0, 65535));
  cmd->add_option("--alias", a->o.model_name, "Model id in /v1/models and responses (default: the directory name)");
  cmd->add_option("--parallel", a->o.parallel, "Sequences decoded together (slots)")->check(CLI::Range(1, 256));
  cmd->add_option("--queue", a->o.queue, "Requests that may wait for a slot; more get 503 + Retry-After")->check(CLI::NonNegativeNumber);
  cmd->add_option("-c,--ctx-size", a->o.ctx_size, "Positions per slot: prompt + generated (0: the model's)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--prefill-chunk", a->o.prefill_chunk, "Prompt tokens prefilled per scheduler step")->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--cache-ram", a->o.cache_ram_mib,
                  "MiB of prompt blocks kept for later prompts with the same beginning (0: off)")->check(CLI::Range(0, 1 << 20));
  cmd->add_option("--slot-save-path", a->o.slot_save_path, "POST /slots/ID?action=save|restore files go in this directory")
      ->check(CLI::ExistingDirectory);
  auto* key = cmd->add_option("--api-key", a->o.api_key, "Require Authorization: Bearer KEY (all but /health)");
  cmd->add_option("--api-key-file", a->api_key_file, "Read the API key from this file (first line)")->excludes(key);
  cmd->add_option("--max-body-bytes", a->o.max_body_bytes, "Largest request body")->check(CLI::Range(1024, 1 << 30));
  cmd->add_option("--max-upload-bytes", a->o.max_upload_bytes, "Largest audio upload (speech models)")
      ->check(CLI::Range(1024, 1 << 30));
  cmd->add_option("--max-audio-seconds", a->o.max_audio_seconds, "Longest audio accepted (speech models)")
      ->check(CLI::Range(1, 24 * 3600));
  cmd->add_option("--retrieve", a->o.retrieve_dir, "An index directory (tfm index build): completions and chat get its nearest passages");
  cmd->add_option("--retrieve-k", a->o.retrieve_k, "--retrieve: passages a request (a request's \"retrieve\" may ask for others)")
      ->check(CLI::Range(1, 100));
  cmd->add_option("--retrieve-template", a->o.retrieve_template, "--retrieve: a Jinja file over documents and prompt");
  cmd->add_option("--draft-model", a->o.draft_model, "Speculative decoding: a smaller model with the same tokenizer drafts tokens");
  cmd->add_option("--draft-dtype", a->o.draft_dtype, "--draft-model's weight type at load (default: as stored)");
  cmd->add_flag("--lookup", a->o.lookup, "Speculative decoding: draft the tokens that followed the text's last n-gram earlier");
  cmd->add_option("--draft", a->o.draft_max, "Speculative decoding: the longest draft (it adapts below this)")->check(CLI::Range(1, 64));
  cmd->add_option("--lookup-ngram", a->o.lookup_ngram, "--lookup: the longest n-gram matched")->check(CLI::Range(1, 16));
  cmd->add_option("--beam-size", a->o.beam_size, "Speech models: beams at temperature 0 (1: greedy)")->check(CLI::Range(1, 16));
  cmd->add_option("--best-of", a->o.best_of, "Speech models: samples at each fallback temperature")->check(CLI::Range(1, 16));
  cmd->add_option("--timeout", a->o.timeout_s, "Seconds a request may take in all")->check(CLI::Range(1, 86400));
  cmd->add_option("--idle-timeout", a->o.idle_timeout_s, "Seconds an idle keep-alive connection stays open")->check(CLI::Range(1, 3600));
  cmd->add_option("--header-timeout", a->o.header_timeout_s, "Seconds a request's line and headers may take to arrive")
      ->check(CLI::Range(1, 3600));
  cmd->add_option("--max-connections", a->o.max_connections, "Connections served at once (a thread each)")
      ->check(CLI::Range(4, 65536));
  cmd->add_option("--max-client-connections", a->o.max_client_connections, "Connections one client address may hold (more: 503)")
      ->check(CLI::Range(1, 65536));
  cmd->add_option("--max-tokens-limit", a->o.max_tokens_limit, "Largest max_tokens accepted")->check(CLI::Range(1, 1 << 24));
  cmd->add_option("--max-n", a->o.max_n, "Largest n accepted")->check(CLI::Range(1, 128));
  cmd->add_option("--cors", a->o.cors_origin, "Allow this browser origin (CORS headers); default: none");
  cmd->add_flag("--no-log", a->o.quiet, "No access log lines on stderr");
  add_max_memory_option(cmd, a->max_memory);
  add_model_parallel_options(cmd, a->model_parallel);
  add_weight_options(cmd, a->weights);
  cmd->add_option("--cache-type", a->o.cache_type, "KV cache type: f32, f16 or q8_0")
      ->check(CLI::IsMember({"f32", "f16", "q8_0"}));
  cmd->callback([a] {
    if (!a->api_key_file.empty()) {
      std::ifstream f(a->api_key_file);
      TFM_CHECK(f.good(), "serve", "cannot read --api-key-file '", a->api_key_file, "'");
      std::getline(f, a->o.api_key);
      while (!a->o.api_key.empty() && (a->o.api_key.back() == '\r' || a->o.api_key.back() == ' ')) a->o.api_key.pop_back();
      TFM_CHECK(!a->o.api_key.empty(), "serve", "--api-key-file '", a->api_key_file, "' holds no key on its first line");
    }
    run_model_parallel(a->model_parallel, [&] {
      LoadedModel lm = load_model(a->o.model_dir, a->adapter, a->weights, a->max_memory, a->o.ctx_size, a->o.parallel,
                                  a->model_parallel);
      if (a->model_parallel.ranks() == 1) {
        server::serve(lm, a->o);
      } else if (dist::rank() == 0) {  // serves HTTP; hands every batch operation to the others
        server::LockstepLeader leader([](const std::string& record) { dist::broadcast_bytes(record, 0); });
        server::serve(lm, a->o, &leader);
      } else {  // repeats rank 0's batch operations until it stops (a signal to this rank waits for that)
        sigset_t stop_signals;
        sigemptyset(&stop_signals);
        sigaddset(&stop_signals, SIGINT);
        sigaddset(&stop_signals, SIGTERM);
        pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
        server::follow_lockstep(lm, a->o, [] { return dist::broadcast_bytes("", 0, dist::world(), /*idle=*/true); });
      }
    });
  });
}

}  // namespace tfm::cli
