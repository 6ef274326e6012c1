// One way to load and run a model, for every front end: the CLI's commands, `tfm serve` and
// programs that embed the engine call these, so a model behaves the same in all of them.
//
//   tfm::LoadOptions o;  o.dtype = "q8_0";
//   tfm::LoadedModel lm = tfm::load_model("models/gpt2", o);          // directory, hub directory or .gguf
//   tfm::Decoding d = tfm::plan_decoding(lm, asked, my_defaults, prompt_tokens);
//   tfm::Generator gen(lm.model, lm.tokenizer, tfm::session_for(lm, {}));
//   gen.generate(prompt, d.generate);
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tfm/generate.h"
#include "tfm/model_dir.h"
#include "tfm/session.h"

namespace tfm {

struct LoadOptions {
  std::string adapter;        // a PEFT adapter directory on top of the model (adapter.h)
  std::string dtype, recipe;  // weight matrices converted at load (quantize.h); "" keeps the stored types
  bool repack = true;         // q4_0 weights repacked for decoding (repack_for_decode)
  // When max_memory > 0: refuse, before any weight is read, when the memory plan (memory_plan.h)
  // for ctx positions (0: the model's) x batch sequences exceeds max_memory bytes.
  std::int64_t max_memory = 0, ctx = 0, batch = 1;
  // Tensor parallelism (Model::shard_tensor_parallel): this process's rank of tp_ranks and the
  // sum of partial products over the ranks (the CLI's: an MPI all-reduce). The model is
  // sharded before any type conversion, and the memory plan is the shard's. tp_ranks 1: whole.
  int tp_rank = 0, tp_ranks = 1;
  Model::PartialSum tp_sum;
  // Pipeline parallelism (Model::shard_pipeline): this process's stage of pp_stages and how
  // stages hand activations on; the memory plan is the stage's. pp_stages 1: the whole model.
  int pp_stage = 0, pp_stages = 1;
  Model::PipeComm pp_comm;
};

// A model directory (the engine's or a Hugging Face hub's) or a .gguf file, with the adapter,
// weight type and repacking of `o`. The conversion's notes (matrices that fell back to another
// type) go to *notes when given.
LoadedModel load_model(const std::string& path, const LoadOptions& o = {}, std::vector<std::string>* notes = nullptr);

// What a caller asks of one decoding. Unset fields come from the model's generation_config.json
// with transformers' meaning (no do_sample: greedy; max_length counts the prompt), then from
// the front end's own defaults.
struct DecodeRequest {
  std::optional<double> temperature, top_p, min_p, repeat_penalty, length_penalty;
  std::optional<std::int64_t> top_k, max_new_tokens, num_beams;
  std::optional<bool> early_stopping;
};

struct Decoding {
  GenerateOptions generate;  // sampling and max_new_tokens, the model's extra end ids
  BeamOptions beam;          // beams, length penalty, max_new_tokens, the end ids
  std::int64_t num_beams = 1;
};

// `asked` over generation_config.json over `fallback` (which sets every field). prompt_tokens:
// the prompt's length for max_length (< 0: unknown, max_length is not used).
Decoding plan_decoding(const LoadedModel& lm, const DecodeRequest& asked, const DecodeRequest& fallback,
                       std::int64_t prompt_tokens);

// `o` with what the model's files ask of a session: the decoder start token of an
// encoder-decoder (generation_config.json).
SessionOptions session_for(const LoadedModel& lm, SessionOptions o);

}  // namespace tfm
