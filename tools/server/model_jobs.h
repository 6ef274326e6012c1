// The model calls of the endpoints that run outside the batch — embeddings, classification,
// reranking, translation, transcription — each a named job whose inputs travel as bytes. In one process the
// scheduler thread runs it; a model split over processes (shards or stages) runs the same job
// on every rank, in the same place among the batch steps (rank 0 hands it to the others with
// the batch's records, lockstep.h), so its partial sums (or activations) meet; rank 0 answers.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "serve_options.h"
#include "tfm/audio.h"
#include "tfm/continuous_batch.h"
#include "tfm/image.h"
#include "tfm/inspect.h"
#include "tfm/model_dir.h"
#include "tfm/session.h"
#include "tfm/transcribe.h"

namespace tfm::server {

struct ModelJob {
  std::string kind;  // embed | classify | rerank | translate | embed_images | classify_images | rollout_images |
                     // attention | transcribe | prompt_cache
  std::string args;  // its inputs (record_bytes.h)
};

ModelJob embed_job(const std::vector<std::string>& texts, const EmbedOptions& o);
ModelJob classify_job(const std::vector<std::string>& texts);
ModelJob rerank_job(const std::string& query, const std::vector<std::string>& documents);
ModelJob translate_job(const std::string& source, const BeamOptions& o);
ModelJob embed_images_job(const std::vector<Image>& images, EmbedPooling pooling, bool normalize);
ModelJob classify_images_job(const std::vector<Image>& images);
// Attention rollouts of pictures, and an attention figure: what a split model's shards and
// stages capture meets on every rank (tfm/attention_map.h), so these run as jobs too.
ModelJob rollout_images_job(const std::vector<Image>& images);
ModelJob attention_job(const AttentionQuery& q);
// A speech model's transcript of audio (samples at the model's rate); beam_size sizes the
// Transcriber as the route does.
ModelJob transcribe_job(const Audio& audio, const TranscribeOptions& o);

// The prompt cache of the batch (the slots' shared cache) saved to a file, restored from one,
// or erased (POST /slots/ID?action=...). Under model parallelism every rank holds its part of
// each cached block (its heads, or its layers): rank r > 0 saves and restores `path`.rank<r>,
// and the ranks agree before rank 0 answers (a restore that fails on any rank empties the
// cache on every rank, so their batches stay the same).
ModelJob prompt_cache_job(const std::string& action, const std::string& path, const std::string& model_id);

// What a job reads besides its inputs: the model, the server's options, the translator an
// encoder-decoder's jobs share (made by the first, sized as `tfm serve` sizes it), and the
// batch (the prompt cache's jobs).
struct JobContext {
  LoadedModel& lm;
  const ServeOptions& opt;
  std::unique_ptr<Translator>& translator;
  ContinuousBatch* batch = nullptr;
};

// A job's answer: the field of its kind.
struct JobResult {
  std::vector<std::vector<float>> embeddings;
  std::vector<Classification> classes;
  std::vector<RerankResult> ranked;
  std::vector<TranslateResult> translations;
  Transcript transcript;
  std::int64_t blocks = 0;  // the prompt cache's blocks saved, restored or erased
  std::vector<ImageAttention> rollouts;
  AttentionFigure figure;
};

// Runs a job (on the scheduler thread, or on another rank as rank 0 runs it).
JobResult run_model_job(JobContext& cx, const ModelJob& job);

}  // namespace tfm::server
