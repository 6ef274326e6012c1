// The library's load path and decoding defaults (tfm/load.h).
#include "tfm/load.h"

#include <algorithm>
#include <filesystem>

#include "tfm/adapter.h"
#include "tfm/error.h"
#include "tfm/gguf.h"
#include "tfm/gguf_model.h"
#include "tfm/memory_plan.h"
#include "tfm/quantize.h"

namespace tfm {

namespace fs = std::filesystem;

namespace {

// The model's config without reading a weight: config.json, or a GGUF file's metadata.
ModelConfig config_only(const std::string& path) {
  if (is_gguf_path(path) && !fs::is_directory(path)) return gguf_model_config(read_gguf(path));
  return load_model_config((fs::path(path) / "config.json").string());
}

}  // namespace

LoadedModel load_model(const std::string& path, const LoadOptions& o, std::vector<std::string>* notes) {
  TFM_CHECK(o.recipe.empty() || !o.dtype.empty(), "recipe", "a recipe (", o.recipe, ") needs a dtype");
  if (o.max_memory > 0) {
    const ModelConfig whole = config_only(path);
    ModelConfig part = o.pp_stages > 1 ? pipeline_config(whole, o.pp_stage, o.pp_stages) : whole;
    if (o.tp_ranks > 1) part = tensor_parallel_config(part, o.tp_ranks);
    const std::string stage = o.pp_stages > 1 ? "stage " + std::to_string(o.pp_stage) : std::string();
    const MemoryPlan p = plan_memory(part, o.ctx, std::max<std::int64_t>(o.batch, 1), std::max(o.tp_ranks, 1));
    check_memory_limit(p.total_bytes, o.max_memory,
                       o.tp_ranks > 1 ? "rank " + std::to_string(o.tp_rank) + "'s shard of " +
                                            (stage.empty() ? "the model" : stage + " of the model") + " in " + path
                       : o.pp_stages > 1 ? stage + " of the model in " + path
                                         : "the model in " + path,
                       summary(p),
                       "lower the context size or the batch (tfm info -m " + path + " prints the plan)");
  }
  // A split model converts its stored bf16/f16 weights to f32 after the split, so a rank reads
  // and holds its part of them only (adapters are refused on a split model anyway).
  const bool split = (o.pp_stages > 1 || o.tp_ranks > 1) && o.adapter.empty();
  LoadedModel lm = load_model_dir(path, split);
  if (!o.adapter.empty()) load_adapter(o.adapter, lm.model);
  // By depth first, then a stage's layers by heads and units (both: a stage of shards).
  if (o.pp_stages > 1) lm.model.shard_pipeline(o.pp_stage, o.pp_stages, o.pp_comm);
  if (o.tp_ranks > 1) lm.model.shard_tensor_parallel(o.tp_rank, o.tp_ranks, o.tp_sum);
  lm.model.convert_deferred_weights();
  if (!o.dtype.empty()) {
    QuantizeOptions q;
    q.type = parse_weight_type(o.dtype, "dtype");
    q.recipe = o.recipe;
    std::vector<std::string> fell_back = quantize_model(lm.model, q);
    if (notes) notes->insert(notes->end(), fell_back.begin(), fell_back.end());
  }
  if (o.repack) repack_for_decode(lm.model);
  return lm;
}

Decoding plan_decoding(const LoadedModel& lm, const DecodeRequest& asked, const DecodeRequest& fallback,
                       std::int64_t prompt_tokens) {
  const GenerationDefaults& g = lm.generation;
  const bool file = g.from_file, sample = g.do_sample.value_or(false);
  const bool seq2seq = lm.config.architecture == Architecture::encoder_decoder;
  // The file's setting when it has one (only while sampling, for the sampling knobs).
  auto pick = [](const auto& a, const auto& from_file, const auto& f) {
    return a.has_value() ? a.value() : from_file.has_value() ? from_file.value() : f.value();
  };
  using OD = std::optional<double>;
  using OI = std::optional<std::int64_t>;
  const OD temperature = file ? OD(sample ? g.temperature.value_or(1.0) : 0.0) : OD();
  const OI top_k = file && sample ? OI(g.top_k.value_or(50)) : OI();
  const OD top_p = file && sample ? OD(g.top_p.value_or(1.0)) : OD();
  const OD min_p = file && sample ? OD(0.0) : OD();  // transformers has no min_p
  OI max_new = g.max_new_tokens;
  if (!max_new && g.max_length) {
    if (seq2seq) max_new = std::max<std::int64_t>(1, *g.max_length - 1);  // it counts the start token
    else if (prompt_tokens >= 0) max_new = std::max<std::int64_t>(0, *g.max_length - prompt_tokens);
  }
  OI beams;
  if (g.num_beams.has_value() && !sample) beams.emplace(*g.num_beams);

  Decoding d;
  SamplingOptions& s = d.generate.sampling;
  s.temperature = pick(asked.temperature, temperature, fallback.temperature);
  s.top_k = pick(asked.top_k, top_k, fallback.top_k);
  s.top_p = pick(asked.top_p, top_p, fallback.top_p);
  s.min_p = pick(asked.min_p, min_p, fallback.min_p);
  s.repeat_penalty = pick(asked.repeat_penalty, g.repetition_penalty, fallback.repeat_penalty);
  d.generate.max_new_tokens = pick(asked.max_new_tokens, max_new, fallback.max_new_tokens);
  d.num_beams = pick(asked.num_beams, beams, fallback.num_beams);
  for (const std::int64_t id : g.eos_token_ids) {
    d.generate.eos_ids.push_back(static_cast<std::int32_t>(id));
    d.beam.more_eos_ids.push_back(static_cast<std::int32_t>(id));
  }
  d.beam.beam_size = d.num_beams;
  d.beam.length_penalty = pick(asked.length_penalty, g.length_penalty, fallback.length_penalty);
  d.beam.early_stopping = pick(asked.early_stopping, g.early_stopping, fallback.early_stopping);
  d.beam.max_new_tokens = d.generate.max_new_tokens;
  d.beam.eos_id = lm.tokenizer.eos_id();
  if (d.beam.eos_id < 0 && !g.eos_token_ids.empty()) d.beam.eos_id = static_cast<std::int32_t>(g.eos_token_ids[0]);
  return d;
}

SessionOptions session_for(const LoadedModel& lm, SessionOptions o) {
  if (lm.generation.decoder_start_token_id && o.decoder_start_id < 0) o.decoder_start_id = *lm.generation.decoder_start_token_id;
  return o;
}

}  // namespace tfm
