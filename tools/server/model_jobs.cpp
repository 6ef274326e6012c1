// The jobs of the endpoints outside the batch, as bytes and back (model_jobs.h).
#include "model_jobs.h"

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
  } else {
    fail("serve", "unknown model job '", job.kind, "'");
  }
  TFM_CHECK(at == in.size(), "serve", "a ", job.kind, " job's record has ", in.size() - at, " bytes too many");
  return r;
}

}  // namespace tfm::server
