// What `tfm serve` is told on its command line (tools/cli/cmd_serve.cpp), and its limits.
#pragma once

#include <cstdint>
#include <string>

namespace tfm::server {

struct ServeOptions {
  std::string model_dir;
  std::string model_name;                // /v1/models id; default: the directory's last component
  std::string host = "127.0.0.1";
  int port = 8080;                       // 0: any free port (printed)
  std::int64_t parallel = 4;             // decode slots (continuous batching)
  std::int64_t queue = 64;               // requests waiting for a slot; more get 503 + Retry-After
  std::int64_t ctx_size = 0;             // positions per slot; 0: the model's
  std::int64_t prefill_chunk = 64;       // prompt tokens prefilled per scheduler step
  std::int64_t cache_ram_mib = 512;      // prompt cache budget (MiB; 0: off)
  std::string slot_save_path;            // /slots saves and restores files here; empty: off
  std::string cache_type = "f32";        // self-attention KV cache: f32, f16 or q8_0
  std::string api_key;                   // empty: no authentication
  std::int64_t max_body_bytes = 1 << 20; // request bodies above this: 413
  std::int64_t max_upload_bytes = 25 << 20;  // audio uploads (multipart) above this: 413 (OpenAI's limit)
  std::int64_t max_audio_seconds = 3600;     // longer uploads: 400
  std::int64_t beam_size = 5, best_of = 5;   // speech models: whisper's search (tfm transcribe's flags)
  std::int64_t timeout_s = 600;          // a request's whole life (generation included)
  std::int64_t idle_timeout_s = 5;       // idle keep-alive connections, and slow reads/writes: 30 s
  std::string cors_origin;               // empty: no CORS headers
  std::int64_t max_tokens_limit = 4096;  // largest max_tokens accepted
  std::int64_t max_n = 16;               // largest n
  std::int64_t max_json_depth = 64;      // JSON nesting accepted
  std::int64_t max_inputs = 256;         // inputs per embeddings / classify / tokenize call
  std::int64_t max_connections = 1024;   // connections served at once (a thread each)
  std::int64_t max_client_connections = 256;  // connections one peer address may hold; more: 503
  std::int64_t header_timeout_s = 5;     // a request's line and headers, from its first byte
  std::string retrieve_dir;              // an index (tfm index build): completions get its passages
  std::int64_t retrieve_k = 3;           // passages a request (its "retrieve" may ask for others)
  std::string retrieve_template;         // Jinja over documents and prompt; empty: the default
  std::string draft_model;               // speculative decoding: a draft with the same vocabulary
  std::string draft_dtype;               // its weight type at load (empty: the model's --dtype)
  bool lookup = false;                   // speculative decoding by prompt lookup
  std::int64_t draft_max = 8;            // the longest draft (it adapts below this)
  std::int64_t lookup_ngram = 3;         // --lookup: the longest n-gram matched
  bool quiet = false;                    // no access log
};

}  // namespace tfm::server
