// The other endpoints: /v1/models, /health, /metrics, /tokenize, /detokenize,
// /v1/embeddings, /v1/rerank, /v1/classify and /v1/attention (the playground's heat map).
#include <algorithm>
#include <cstring>

#include "base/base64.h"
#include "routes.h"
#include "tfm/error.h"
#include "tfm/image.h"
#include "tfm/inspect.h"

namespace tfm::server {
namespace {

// Inputs of one request computed per scheduler job: decode steps run between the pieces.
constexpr std::size_t kJobPiece = 16;

std::vector<std::string> piece(const std::vector<std::string>& all, std::size_t begin, std::size_t end) {
  return {all.begin() + static_cast<std::ptrdiff_t>(begin), all.begin() + static_cast<std::ptrdiff_t>(end)};
}

// `input` as a list of non-empty strings (a string or an array of them), at most max_inputs.
std::vector<std::string> text_inputs(const Json& b, const ServeOptions& opt) {
  const auto it = b.find("input");
  std::vector<std::string> out;
  if (it != b.end() && it->is_string()) out.push_back(it->get<std::string>());
  else if (it != b.end() && it->is_array() && !it->empty()) {
    for (const auto& x : *it) {
      if (!x.is_string())
        throw ApiError(400, "invalid_request_error", "unsupported_value", "input must be a string or an array of strings", "input");
      out.push_back(x.get<std::string>());
    }
  } else bad_param("input", "input must be a non-empty string or array of strings");
  if (static_cast<std::int64_t>(out.size()) > opt.max_inputs)
    bad_param("input", "at most " + std::to_string(opt.max_inputs) + " inputs per request");
  for (const auto& s : out)
    if (s.empty()) bad_param("input", "inputs must not be empty");
  return out;
}

// An image model's `input`: an image or an array of them, each a data: URL string or OpenAI's
// {"type": "image_url", "image_url": {"url": ...}}; at most max_inputs, each at most
// kMaxRequestPixels pixels (checked from the header, before the pixels are decoded).
constexpr std::int64_t kMaxRequestPixels = std::int64_t{1} << 24;

std::vector<Image> image_inputs(ServerContext& cx, const Json& b) {
  const auto it = b.find("input");
  if (it == b.end() || !(it->is_string() || it->is_object() || (it->is_array() && !it->empty())))
    bad_param("input", "input must be an image (a data: URL) or a non-empty array of them");
  const Json items = it->is_array() ? *it : Json::array({*it});
  if (static_cast<std::int64_t>(items.size()) > cx.opt.max_inputs)
    bad_param("input", "at most " + std::to_string(cx.opt.max_inputs) + " inputs per request");
  std::vector<Image> out;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const std::string where = "input[" + std::to_string(i) + "]";
    const Json& x = items[i];
    std::string url;
    if (x.is_string()) url = x.get<std::string>();
    else if (x.is_object() && x.value("type", "") == "image_url" && x.contains("image_url") && x["image_url"].is_object() &&
             x["image_url"].contains("url") && x["image_url"]["url"].is_string())
      url = x["image_url"]["url"].get<std::string>();
    else
      bad_param("input", where + ": an image is a data: URL string or {\"type\": \"image_url\", \"image_url\": {\"url\": ...}}");
    try {
      out.push_back(decode_data_url(url, where, kMaxRequestPixels));
    } catch (const tfm::Error& e) {
      bad_param("input", e.what());
    }
  }
  access_info().prompt_tokens = static_cast<std::int64_t>(out.size()) * cx.lm.config.image_tokens();
  return out;
}

// Whether a CLIP model's `input` holds pictures (data: URLs or image_url parts) rather than
// texts; one kind per request.
bool input_is_images(const Json& b) {
  const auto it = b.find("input");
  if (it == b.end()) return false;
  const auto is_image = [](const Json& x) {
    return x.is_object() || (x.is_string() && x.get<std::string>().rfind("data:", 0) == 0);
  };
  if (!it->is_array()) return is_image(*it);
  bool any = false, all = true;
  for (const auto& x : *it) {
    any = any || is_image(x);
    all = all && is_image(x);
  }
  if (any && !all) bad_param("input", "input mixes pictures and texts: send one kind per request");
  return any;
}

// CLIP's texts: each must fit the text tower's positions with its special tokens.
std::int64_t count_text_tower_tokens(ServerContext& cx, const std::vector<std::string>& texts, const char* param) {
  std::int64_t total = 0;
  const std::int64_t P = cx.lm.config.text_tower.max_positions;
  for (const auto& t : texts) {
    const auto n = static_cast<std::int64_t>(cx.lm.tokenizer.encode_full(t, true).ids.size());
    if (n > P)
      throw ApiError(400, "invalid_request_error", "context_length_exceeded",
                     "a text is " + std::to_string(n) + " tokens with its special tokens; the text tower takes " +
                         std::to_string(P),
                     param);
    total += n;
  }
  return total;
}

// Checks each input's token count against the model's positions.
std::int64_t count_tokens(ServerContext& cx, const std::vector<std::string>& texts) {
  std::int64_t total = 0;
  for (const auto& t : texts) {
    const auto n = static_cast<std::int64_t>(cx.lm.tokenizer.encode(t).size());
    if (n + 2 > cx.lm.config.max_positions)  // room for [CLS]/[SEP]-style specials
      throw ApiError(400, "invalid_request_error", "context_length_exceeded",
                     "an input is " + std::to_string(n) + " tokens; the model takes " + std::to_string(cx.lm.config.max_positions - 2),
                     "input");
    total += n;
  }
  access_info().prompt_tokens = total;
  return total;
}

std::string base64(const std::vector<float>& v) {
  std::string bytes(v.size() * 4, '\0');
  std::memcpy(bytes.data(), v.data(), bytes.size());  // little-endian f32, as OpenAI's
  return base64_encode(bytes);
}

void embeddings(ServerContext& cx, const httplib::Request& req, httplib::Response& res) {
  const Json b = parse_body(req.body, cx.opt.max_json_depth);
  reject_unknown(b, {"model", "input", "encoding_format", "dimensions", "user", "pooling", "normalize", "prompt_name"});
  // dimensions: OpenAI's shortened embeddings (Matryoshka truncation, renormalised when the
  // vectors are unit length); more than the model gives is a 400.
  std::int64_t dimensions = 0;
  if (b.contains("dimensions") && !b["dimensions"].is_null()) {
    if (!b["dimensions"].is_number_integer() || b["dimensions"].get<std::int64_t>() < 1)
      bad_param("dimensions", "dimensions must be a positive integer");
    dimensions = b["dimensions"].get<std::int64_t>();
  }
  const std::string format = get_string(b, "encoding_format").value_or("float");
  if (format != "float" && format != "base64") bad_param("encoding_format", "encoding_format must be float or base64");
  const std::string pooling = get_string(b, "pooling").value_or("auto");
  if (pooling != "auto" && pooling != "mean" && pooling != "first" && pooling != "last")
    bad_param("pooling", "pooling must be auto, mean, first or last");
  const bool normalize = get_bool(b, "normalize").value_or(false);
  EmbedOptions eo;
  eo.pooling = embed_pooling_from_name(pooling);
  eo.normalize = normalize;
  eo.dimensions = dimensions;
  eo.prompt_name = get_string(b, "prompt_name").value_or("");
  if (!eo.prompt_name.empty() && !(cx.lm.sentence && cx.lm.sentence->prompts.count(eo.prompt_name)))
    bad_param("prompt_name", "the model has no prompt named '" + eo.prompt_name + "'");
  const bool clip = cx.lm.config.text_tower.enabled();  // texts and pictures in one space
  const std::int64_t width = clip ? cx.lm.config.text_tower.projection_dim
                             : cx.lm.sentence && eo.pooling == EmbedPooling::automatic ? cx.lm.sentence->dimension()
                                                                                        : cx.lm.config.d_model;
  if (dimensions > width) bad_param("dimensions", "dimensions " + std::to_string(dimensions) + " is more than the model's " + std::to_string(width));
  std::vector<std::vector<float>> vecs;
  std::int64_t tokens = 0;
  if (cx.lm.config.reads_images() && (!clip || input_is_images(b))) {
    const auto images = image_inputs(cx, b);
    tokens = access_info().prompt_tokens;
    const ModelJob job = embed_images_job(images, embed_pooling_from_name(pooling), normalize);
    cx.sched.run_job([&] {
      JobContext jobs = cx.jobs();
      vecs = run_model_job(jobs, job).embeddings;
    }, clip ? nullptr : &job);  // (CLIP is not split over processes)
    truncate_embeddings(vecs, dimensions, normalize);
  } else {
    const auto texts = text_inputs(b, cx.opt);
    tokens = clip ? count_text_tower_tokens(cx, texts, "input") : count_tokens(cx, texts);
    access_info().prompt_tokens = tokens;
    JobContext jobs = cx.jobs();
    cx.sched.run_job_pieces(
        texts.size(), kJobPiece, jobs, [&](std::size_t a, std::size_t z) { return embed_job(piece(texts, a, z), eo); },
        [&](std::size_t, JobResult& r) {
          for (auto& v : r.embeddings) vecs.push_back(std::move(v));
        });
  }
  Json data = Json::array();
  for (std::size_t i = 0; i < vecs.size(); ++i)
    data.push_back({{"object", "embedding"}, {"index", i},
                    {"embedding", format == "base64" ? Json(base64(vecs[i])) : Json(vecs[i])}});
  send_json(res, {{"object", "list"}, {"data", data}, {"model", cx.model_id},
                  {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}});
}

// /v1/rerank (also /rerank, /v1/reranking), the request and answer llama.cpp's server and
// Jina's API share: {"query", "documents": [text or {"text"}], "top_n", "return_documents"}
// -> {"results": [{"index", "relevance_score", "document": {"text"}}]} best first, scored by a
// cross-encoder (a classifier head over the pair; tfm::rerank).
void rerank_route(ServerContext& cx, const httplib::Request& req, httplib::Response& res) {
  const Json b = parse_body(req.body, cx.opt.max_json_depth);
  reject_unknown(b, {"model", "query", "documents", "top_n", "return_documents", "user"});
  if (cx.lm.config.head != HeadKind::classifier || cx.lm.config.reads_images() ||
      cx.lm.config.architecture == Architecture::encoder_decoder)
    throw ApiError(400, "invalid_request_error", "model_not_supported",
                   "reranking needs a cross-encoder (a text classifier head over a query-document pair)");
  const auto query = get_string(b, "query");
  if (!query || query->empty()) bad_param("query", "query must be a non-empty string");
  const auto it = b.find("documents");
  if (it == b.end() || !it->is_array() || it->empty()) bad_param("documents", "documents must be a non-empty array");
  if (static_cast<std::int64_t>(it->size()) > cx.opt.max_inputs)
    bad_param("documents", "at most " + std::to_string(cx.opt.max_inputs) + " documents per request");
  std::vector<std::string> docs;
  for (const auto& d : *it) {
    if (d.is_string()) docs.push_back(d.get<std::string>());
    else if (d.is_object() && d.contains("text") && d["text"].is_string()) docs.push_back(d["text"].get<std::string>());
    else bad_param("documents", "each document is a string or {\"text\": string}");
    if (docs.back().empty()) bad_param("documents", "documents must not be empty");
  }
  const std::int64_t top_n = get_int(b, "top_n", 1, 1 << 30).value_or(static_cast<std::int64_t>(docs.size()));
  const bool return_documents = get_bool(b, "return_documents").value_or(true);
  const std::int64_t query_tokens = static_cast<std::int64_t>(cx.lm.tokenizer.encode(*query).size());
  if (query_tokens + 4 > cx.lm.config.max_positions)
    throw ApiError(400, "invalid_request_error", "context_length_exceeded",
                   "the query is " + std::to_string(query_tokens) + " tokens; the model takes " +
                       std::to_string(cx.lm.config.max_positions) + " for query and document together",
                   "query");
  std::int64_t tokens = 0;
  for (const auto& d : docs) tokens += query_tokens + static_cast<std::int64_t>(cx.lm.tokenizer.encode(d).size());
  access_info().prompt_tokens = tokens;
  std::vector<RerankResult> scored;
  JobContext jobs = cx.jobs();
  cx.sched.run_job_pieces(
      docs.size(), kJobPiece, jobs, [&](std::size_t a, std::size_t z) { return rerank_job(*query, piece(docs, a, z)); },
      [&](std::size_t a, JobResult& r) {
        for (RerankResult x : r.ranked) {
          x.index += static_cast<std::int64_t>(a);
          scored.push_back(x);
        }
      });
  std::stable_sort(scored.begin(), scored.end(), [](const RerankResult& x, const RerankResult& y) {
    return x.relevance > y.relevance || (x.relevance == y.relevance && x.index < y.index);
  });
  Json results = Json::array();
  for (std::size_t i = 0; i < scored.size() && static_cast<std::int64_t>(i) < top_n; ++i) {
    Json r = {{"index", scored[i].index}, {"relevance_score", scored[i].relevance}};
    if (return_documents) r["document"] = {{"text", docs[static_cast<std::size_t>(scored[i].index)]}};
    results.push_back(std::move(r));
  }
  send_json(res, {{"object", "list"}, {"model", cx.model_id}, {"results", results},
                  {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}});
}

void classify_route(ServerContext& cx, const httplib::Request& req, httplib::Response& res) {
  const Json b = parse_body(req.body, cx.opt.max_json_depth);
  reject_unknown(b, {"model", "input", "user", "rollout", "overlay", "labels"});
  // CLIP: zero-shot, the pictures against the request's label texts.
  const bool clip = cx.lm.config.text_tower.enabled();
  std::vector<std::string> labels;
  if (clip) {
    const auto it = b.find("labels");
    if (it == b.end() || !it->is_array() || it->empty())
      bad_param("labels", "a CLIP model classifies pictures against label texts: labels must be a non-empty array of strings");
    if (static_cast<std::int64_t>(it->size()) > cx.opt.max_inputs)
      bad_param("labels", "at most " + std::to_string(cx.opt.max_inputs) + " labels per request");
    for (const auto& x : *it) {
      if (!x.is_string() || x.get<std::string>().empty()) bad_param("labels", "each label is a non-empty string");
      labels.push_back(x.get<std::string>());
    }
    count_text_tower_tokens(cx, labels, "labels");
  } else if (b.contains("labels")) {
    bad_param("labels", "labels are for zero-shot classification with a CLIP model; this model has its own classes");
  } else if (cx.lm.config.head != HeadKind::classifier) {
    throw ApiError(400, "invalid_request_error", "model_not_supported", "this model is not a classifier");
  }
  const bool images = cx.lm.config.reads_images();
  // overlay: the picture as the model saw it with its rollout laid over it, a PNG data: URL
  // (the picture `tfm attention --image` writes), which the playground shows.
  const bool overlay = get_bool(b, "overlay").value_or(false);
  const bool rollout = get_bool(b, "rollout").value_or(false) || overlay;
  if (rollout && !images) bad_param(overlay ? "overlay" : "rollout", "rollout (the attention over an image's patches) is for image models");
  std::vector<Classification> rs;
  std::vector<ImageAttention> maps;
  std::int64_t tokens = 0;
  if (images) {
    const auto pictures = image_inputs(cx, b);
    tokens = access_info().prompt_tokens;
    // A split model's ranks run the classification and the rollouts as jobs (CLIP is not split).
    const ModelJob job = classify_images_job(pictures);
    cx.sched.run_job([&] {
      JobContext jobs = cx.jobs();
      rs = clip ? zero_shot_classify(cx.lm, pictures, labels, &cx.label_cache) : run_model_job(jobs, job).classes;
    }, clip ? nullptr : &job);
    if (rollout) {
      const ModelJob rollouts = rollout_images_job(pictures);
      cx.sched.run_job([&] {
        JobContext jobs = cx.jobs();
        maps = run_model_job(jobs, rollouts).rollouts;
      }, clip ? nullptr : &rollouts);
    }
  } else {
    const auto texts = text_inputs(b, cx.opt);
    tokens = count_tokens(cx, texts);
    JobContext jobs = cx.jobs();
    cx.sched.run_job_pieces(
        texts.size(), kJobPiece, jobs, [&](std::size_t a, std::size_t z) { return classify_job(piece(texts, a, z)); },
        [&](std::size_t, JobResult& r) {
          for (auto& c : r.classes) rs.push_back(std::move(c));
        });
  }
  Json data = Json::array();
  for (std::size_t i = 0; i < rs.size(); ++i) {
    Json probs = Json::object();
    const auto& names = clip ? labels : cx.lm.config.id2label;
    for (std::size_t k = 0; k < rs[i].probabilities.size(); ++k)
      probs[k < names.size() ? names[k] : std::to_string(k)] = rs[i].probabilities[k];
    data.push_back({{"object", "classification"}, {"index", i}, {"label", rs[i].name}, {"label_id", rs[i].label},
                    {"probability", rs[i].probability}, {"probabilities", probs}});
    if (rollout) data.back()["rollout"] = {{"grid", maps[i].grid}, {"values", maps[i].rollout}};
    if (overlay) data.back()["rollout"]["overlay"] = "data:image/png;base64," + base64_encode(encode_png(attention_overlay(maps[i])));
  }
  send_json(res, {{"object", "list"}, {"data", data}, {"model", cx.model_id},
                  {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}});
}

void attention(ServerContext& cx, const httplib::Request& req, httplib::Response& res) {
  const Json b = parse_body(req.body, cx.opt.max_json_depth);
  reject_unknown(b, {"model", "prompt", "completion", "layer", "head", "max_tokens"});
  AttentionQuery q;
  q.prompt = get_string(b, "prompt").value_or("") + get_string(b, "completion").value_or("");
  if (q.prompt.empty()) bad_param("prompt", "prompt (+ completion) must be a non-empty string");
  q.layer = get_int(b, "layer", -1, 1 << 20).value_or(-1);
  q.head = get_int(b, "head", -1, 1 << 20).value_or(-1);
  const std::int64_t limit = get_int(b, "max_tokens", 1, 512).value_or(256);
  const auto n = static_cast<std::int64_t>(cx.lm.tokenizer.encode(q.prompt).size());
  if (n > limit || n > cx.lm.config.max_positions)
    throw ApiError(400, "invalid_request_error", "context_length_exceeded",
                   "attention maps are drawn for at most " + std::to_string(std::min(limit, cx.lm.config.max_positions)) +
                       " tokens; this text is " + std::to_string(n),
                   "prompt");
  access_info().prompt_tokens = n;
  AttentionFigure f;
  const ModelJob job = attention_job(q);
  cx.sched.run_job([&] {
    JobContext jobs = cx.jobs();
    f = run_model_job(jobs, job).figure;
  }, &job);
  Json maps = Json::array();
  for (const auto& m : f.maps) maps.push_back({{"title", m.title}, {"rows", m.row_labels}, {"cols", m.col_labels}, {"values", m.values}});
  send_json(res, {{"object", "attention"}, {"model", cx.model_id}, {"stack", f.stack}, {"kind", f.kind},
                  {"layer", f.layer}, {"head", f.head}, {"maps", maps}});
}

}  // namespace

void add_model_routes(RouteTable& routes, ServerContext& cx) {
  routes.get("/health", [](const httplib::Request&, httplib::Response& res) { send_json(res, {{"status", "ok"}}); });
  routes.get("/v1/models", guarded([&cx](const httplib::Request&, httplib::Response& res) {
    const ModelConfig& c = cx.lm.config;
    Json meta = {{"architecture", to_string(c.architecture)}, {"vocab_size", c.vocab_size}, {"n_layers", c.n_layers},
                 {"d_model", c.d_model}, {"n_heads", c.n_heads}, {"max_positions", c.max_positions},
                 {"n_ctx", cx.sched.generates() ? cx.sched.batch().context_size() : c.max_positions},
                 {"parallel", cx.sched.generates() ? cx.sched.batch().slots() : 0}, {"chat_template_default", cx.chat_cfg.is_default},
                 {"reads_images", c.reads_images()}, {"head", to_string(c.head)},
                 {"zero_shot", c.text_tower.enabled()}};
    send_json(res, {{"object", "list"},
                    {"data", Json::array({{{"id", cx.model_id}, {"object", "model"}, {"created", cx.created},
                                           {"owned_by", "tfm"}, {"meta", meta}}})}});
  }));
  routes.get("/metrics", [&cx](const httplib::Request&, httplib::Response& res) {
    res.set_content(cx.metrics.text(), "text/plain; version=0.0.4");
  });
  routes.post("/tokenize", guarded([&cx](const httplib::Request& req, httplib::Response& res) {
    const Json b = parse_body(req.body, cx.opt.max_json_depth);
    reject_unknown(b, {"content", "add_special", "with_pieces"});
    const auto text = get_string(b, "content");
    if (!text) bad_param("content", "content must be a string");
    const auto ids = cx.lm.tokenizer.encode(*text, get_bool(b, "add_special").value_or(false));
    Json tokens = Json::array();
    if (get_bool(b, "with_pieces").value_or(false))
      for (const auto id : ids) tokens.push_back({{"id", id}, {"piece", cx.lm.tokenizer.decode(std::vector<std::int32_t>{id})}});
    else tokens = ids;
    send_json(res, {{"tokens", tokens}});
  }));
  routes.post("/detokenize", guarded([&cx](const httplib::Request& req, httplib::Response& res) {
    const Json b = parse_body(req.body, cx.opt.max_json_depth);
    reject_unknown(b, {"tokens"});
    const auto it = b.find("tokens");
    if (it == b.end() || !it->is_array()) bad_param("tokens", "tokens must be an array of token ids");
    std::vector<std::int32_t> ids;
    for (const auto& x : *it) {
      if (!x.is_number_integer() || x.get<std::int64_t>() < 0 || x.get<std::int64_t>() >= cx.lm.tokenizer.vocab_size())
        bad_param("tokens", "token ids must be integers in [0, " + std::to_string(cx.lm.tokenizer.vocab_size()) + ")");
      ids.push_back(static_cast<std::int32_t>(x.get<std::int64_t>()));
    }
    send_json(res, {{"content", cx.lm.tokenizer.decode(ids)}});
  }));
  routes.post("/v1/embeddings", guarded([&cx](const httplib::Request& req, httplib::Response& res) { embeddings(cx, req, res); }));
  for (const char* path : {"/v1/rerank", "/rerank", "/v1/reranking"})
    routes.post(path, guarded([&cx](const httplib::Request& req, httplib::Response& res) { rerank_route(cx, req, res); }));
  routes.post("/v1/classify", guarded([&cx](const httplib::Request& req, httplib::Response& res) { classify_route(cx, req, res); }));
  routes.post("/v1/attention", guarded([&cx](const httplib::Request& req, httplib::Response& res) { attention(cx, req, res); }));
}

}  // namespace tfm::server
