// The jobs of the endpoints outside the batch, as bytes and back (model_jobs.h).
#include "model_jobs.h"

#include "dist/comm.h"
#include "record_bytes.h"
#include "tfm/error.h"
#include "tfm/load.h"

namespace tfm::server {

using namespace bytes;

ModelJob embed_job(const std::vector<std::string>& texts, const EmbedOptions& o) {
  ModelJob j{"embed", {}};
  put_strings(j.args, texts);
  put(j.args, static_cast<std::int32_t>(o.pooling)), put<std::uint8_t>(j.args, o.normalize), put(j.args, o.dimensions);
  put_string(j.args, o.prompt), put_string(j.args, o.prompt_name);
  return j;
}

ModelJob classify_job(const std::vector<std::string>& texts) {
  ModelJob j{"classify", {}};
  put_strings(j.args, texts);
  return j;
}

ModelJob rerank_job(const std::string& query, const std::vector<std::string>& documents) {
  ModelJob j{"rerank", {}};
  put_string(j.args, query);
  put_strings(j.args, documents);
  return j;
}

// Every field of BeamOptions (a new one must travel too, or the ranks would search differently).
ModelJob translate_job(const std::string& source, const BeamOptions& o) {
  ModelJob j{"translate", {}};
  put_string(j.args, source);
  put(j.args, o.beam_size), put(j.args, o.n_best), put(j.args, o.length_penalty);
  put(j.args, static_cast<std::int32_t>(o.penalty_form)), put<std::uint8_t>(j.args, o.early_stopping);
  put(j.args, o.max_new_tokens), put(j.args, o.eos_id);
  put_ids(j.args, o.more_eos_ids);
  return j;
}

ModelJob prompt_cache_job(const std::string& action, const std::string& path, const std::string& model_id) {
  ModelJob j{"prompt_cache", {}};
  put_string(j.args, action), put_string(j.args, path), put_string(j.args, model_id);
  return j;
}

namespace {

// The prompt cache job on this rank, then (split over processes) every rank's outcome: the
// first rank's error is everyone's.
std::int64_t run_prompt_cache_job(ContinuousBatch& batch, const std::string& action, const std::string& path,
                                  const std::string& model_id) {
  const int rank = dist::rank(), ranks = dist::size();
  // Each rank's file holds its part of the blocks, and its layout names the rank, so that no
  // rank restores another's part.
  const std::string mine = rank == 0 ? path : path + ".rank" + std::to_string(rank);
  const std::string id = ranks == 1 ? model_id : model_id + " rank " + std::to_string(rank) + " of " + std::to_string(ranks);
  std::int64_t blocks = 0;
  std::string error;
  try {
    if (action == "save") blocks = batch.save_prompt_cache(mine, id);
    else if (action == "restore") blocks = batch.load_prompt_cache(mine, id);
    else if (action == "erase") blocks = batch.erase_prompt_cache();
    else fail("serve", "unknown prompt cache action '", action, "'");
  } catch (const std::exception& e) {
    if (ranks == 1) throw;
    error = e.what();
  }
  if (ranks == 1) return blocks;
  const std::vector<std::string> all = dist::allgather_bytes(error);
  for (std::size_t r = 0; r < all.size(); ++r) {
    if (all[r].empty()) continue;
    const bool emptied = action == "restore";
    if (emptied) batch.erase_prompt_cache();  // the same (empty) cache on every rank
    fail("prompt cache", "rank ", r, " of ", ranks, ": ", all[r], emptied ? " (the prompt cache was emptied on every rank)" : "");
  }
  return blocks;
}

void put_images(std::string& out, const std::vector<Image>& images) {
  put<std::uint64_t>(out, images.size());
  for (const Image& im : images) {
    put(out, im.width), put(out, im.height);
    put_values(out, im.rgb);
  }
}

std::vector<Image> get_images(const std::string& in, std::size_t& at) {
  const auto n = get<std::uint64_t>(in, at);
  need(in, at, n * 3 * sizeof(std::uint64_t));  // each at least its sizes
  std::vector<Image> images(n);
  for (Image& im : images) {
    im.width = get<std::int64_t>(in, at), im.height = get<std::int64_t>(in, at);
    im.rgb = get_values<std::uint8_t>(in, at);
  }
  return images;
}

}  // namespace

ModelJob embed_images_job(const std::vector<Image>& images, EmbedPooling pooling, bool normalize) {
  ModelJob j{"embed_images", {}};
  put_images(j.args, images);
  put(j.args, static_cast<std::int32_t>(pooling)), put<std::uint8_t>(j.args, normalize);
  return j;
}

ModelJob classify_images_job(const std::vector<Image>& images) {
  ModelJob j{"classify_images", {}};
  put_images(j.args, images);
  return j;
}

ModelJob rollout_images_job(const std::vector<Image>& images) {
  ModelJob j{"rollout_images", {}};
  put_images(j.args, images);
  return j;
}

ModelJob attention_job(const AttentionQuery& q) {
  ModelJob j{"attention", {}};
  put_string(j.args, q.prompt), put_string(j.args, q.target), put_string(j.args, q.stack), put_string(j.args, q.kind);
  put(j.args, q.layer), put(j.args, q.head);
  return j;
}

// Every field of TranscribeOptions (as BeamOptions above).
ModelJob transcribe_job(const Audio& audio, const TranscribeOptions& o) {
  ModelJob j{"transcribe", {}};
  put_values(j.args, audio.samples);
  put(j.args, audio.sample_rate);
  put_string(j.args, o.language), put_string(j.args, o.task), put<std::uint8_t>(j.args, o.timestamps);
  put_values(j.args, o.temperatures);
  put(j.args, o.beam_size), put(j.args, o.best_of), put(j.args, o.compression_ratio_threshold);
  put(j.args, o.logprob_threshold), put(j.args, o.no_speech_threshold);
  put<std::uint8_t>(j.args, o.condition_on_previous_text), put_string(j.args, o.initial_prompt);
  put(j.args, o.max_new_tokens), put(j.args, o.seed), put<std::uint8_t>(j.args, o.word_timestamps);
  put_string(j.args, o.prepend_punctuations), put_string(j.args, o.append_punctuations);
  return j;
}

JobResult run_model_job(JobContext& cx, const ModelJob& job) {
  const std::string& in = job.args;
  std::size_t at = 0;
  JobResult r;
  if (job.kind == "embed") {
    const std::vector<std::string> texts = get_strings(in, at);
    EmbedOptions o;
    o.pooling = static_cast<EmbedPooling>(get<std::int32_t>(in, at));
    o.normalize = get<std::uint8_t>(in, at) != 0, o.dimensions = get<std::int64_t>(in, at);
    o.prompt = get_string(in, at), o.prompt_name = get_string(in, at);
    r.embeddings = embed(cx.lm, texts, o);
  } else if (job.kind == "classify") {
    r.classes = classify(cx.lm, get_strings(in, at));
  } else if (job.kind == "rerank") {
    const std::string query = get_string(in, at);
    r.ranked = rerank(cx.lm, query, get_strings(in, at));
  } else if (job.kind == "translate") {
    const std::string source = get_string(in, at);
    BeamOptions o;
    o.beam_size = get<std::int64_t>(in, at), o.n_best = get<std::int64_t>(in, at), o.length_penalty = get<double>(in, at);
    o.penalty_form = static_cast<LengthPenalty>(get<std::int32_t>(in, at)), o.early_stopping = get<std::uint8_t>(in, at) != 0;
    o.max_new_tokens = get<std::int64_t>(in, at), o.eos_id = get<std::int32_t>(in, at);
    o.more_eos_ids = get_ids(in, at);
    if (!cx.translator) {
      SessionOptions so;
      so.max_batch = 16;
      so.ctx_size = cx.opt.ctx_size;
      so.cache_type = dtype_from_name(cx.opt.cache_type);
      cx.translator = std::make_unique<Translator>(cx.lm.model, cx.lm.tokenizer, session_for(cx.lm, so));
    }
    r.translations = cx.translator->translate({source}, o);
  } else if (job.kind == "embed_images") {
    const std::vector<Image> images = get_images(in, at);
    const auto pooling = static_cast<EmbedPooling>(get<std::int32_t>(in, at));
    r.embeddings = embed_images(cx.lm, images, pooling, get<std::uint8_t>(in, at) != 0);
  } else if (job.kind == "classify_images") {
    r.classes = classify_images(cx.lm, get_images(in, at));
  } else if (job.kind == "transcribe") {
    Audio audio;
    audio.samples = get_values<float>(in, at);
    audio.sample_rate = get<std::int64_t>(in, at);
    TranscribeOptions o;
    o.language = get_string(in, at), o.task = get_string(in, at), o.timestamps = get<std::uint8_t>(in, at) != 0;
    o.temperatures = get_values<double>(in, at);
    o.beam_size = get<std::int64_t>(in, at), o.best_of = get<std::int64_t>(in, at);
    o.compression_ratio_threshold = get<double>(in, at), o.logprob_threshold = get<double>(in, at);
    o.no_speech_threshold = get<double>(in, at);
    o.condition_on_previous_text = get<std::uint8_t>(in, at) != 0, o.initial_prompt = get_string(in, at);
    o.max_new_tokens = get<std::int64_t>(in, at), o.seed = get<std::uint64_t>(in, at);
    o.word_timestamps = get<std::uint8_t>(in, at) != 0;
    o.prepend_punctuations = get_string(in, at), o.append_punctuations = get_string(in, at);
    Transcriber tr(cx.lm, o.beam_size);
    r.transcript = tr.transcribe(audio, o);
  } else if (job.kind == "rollout_images") {
    for (const Image& image : get_images(in, at)) r.rollouts.push_back(attention_rollout(cx.lm, image));
  } else if (job.kind == "attention") {
    AttentionQuery q;
    q.prompt = get_string(in, at), q.target = get_string(in, at), q.stack = get_string(in, at), q.kind = get_string(in, at);
    q.layer = get<std::int64_t>(in, at), q.head = get<std::int64_t>(in, at);
    r.figure = attention_figure(cx.lm, q);
  } else if (job.kind == "prompt_cache") {
    const std::string action = get_string(in, at), path = get_string(in, at), model_id = get_string(in, at);
    TFM_CHECK(cx.batch != nullptr, "serve", "the model does not generate: it has no prompt cache");
    r.blocks = run_prompt_cache_job(*cx.batch, action, path, model_id);
  } else {
    fail("serve", "unknown model job '", job.kind, "'");
  }
  TFM_CHECK(at == in.size(), "serve", "a ", job.kind, " job's record has ", in.size() - at, " bytes too many");
  return r;
}

}  // namespace tfm::server
