// Index directories: building (in checkpoints, resumable, --add), opening (every file checked)
// and searching. retrieval.h describes the files.
#include <zlib.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "tfm/error.h"
#include "tfm/retrieval.h"
#include "tfm/safetensors.h"

namespace tfm {

namespace fs = std::filesystem;
using Json = nlohmann::json;

namespace {

constexpr const char* kManifest = "index.json";
constexpr const char* kPassages = "passages.jsonl";
constexpr const char* kVectors = "vectors.f32";
constexpr const char* kIndex = "index.faiss";
// The text whose vector identifies the encoder (any fixed text would do).
constexpr const char* kProbe = "The quick brown fox jumps over the lazy dog.";

std::string join(const std::string& dir, const char* name) { return (fs::path(dir) / name).string(); }

std::string crc_hex(const std::string& bytes) {
  const auto c = crc32_z(0L, reinterpret_cast<const Bytef*>(bytes.data()), bytes.size());
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08lx", static_cast<unsigned long>(c));
  return buf;
}

std::string corpus_crc(const std::vector<Passage>& passages) {
  uLong c = 0;
  for (const Passage& p : passages) {
    c = crc32_z(c, reinterpret_cast<const Bytef*>(p.id.data()), p.id.size());
    c = crc32_z(c, reinterpret_cast<const Bytef*>("\n"), 1);
    c = crc32_z(c, reinterpret_cast<const Bytef*>(p.text.data()), p.text.size());
    c = crc32_z(c, reinterpret_cast<const Bytef*>("\n"), 1);
  }
  char buf[16];
  std::snprintf(buf, sizeof buf, "%08lx", static_cast<unsigned long>(c));
  return buf;
}

Json read_manifest(const std::string& dir) {
  const std::string path = join(dir, kManifest);
  Json j;
  try {
    j = Json::parse(read_file(path));
  } catch (const Json::exception& e) {
    fail(path, "not valid JSON: ", e.what());
  }
  TFM_CHECK(j.is_object() && j.value("format", "") == "tfm-index", path, "is not a tfm index manifest");
  TFM_CHECK(j.value("version", 0) == 1, path, "index format version ", j.value("version", 0), " is not supported (1)");
  for (const char* key : {"encoder", "type", "metric", "settings", "count", "files"})
    TFM_CHECK(j.contains(key), path, "has no \"", key, "\"");
  return j;
}

Json settings_json(const IndexSettings& s) {
  return {{"hnsw_m", s.hnsw_m}, {"ef_construction", s.ef_construction}, {"ef_search", s.ef_search},
          {"nlist", s.nlist},   {"pq_m", s.pq_m},                       {"nprobe", s.nprobe},
          {"refine", s.refine}};
}

IndexSettings settings_from(const Json& j, const std::string& where) {
  IndexSettings s;
  try {
    s.hnsw_m = j.value("hnsw_m", 0);
    s.ef_construction = j.value("ef_construction", 0);
    s.ef_search = j.value("ef_search", 0);
    s.nlist = j.value("nlist", 0);
    s.pq_m = j.value("pq_m", 0);
    s.nprobe = j.value("nprobe", 0);
    s.refine = j.value("refine", 0);
  } catch (const Json::exception& e) {
    fail(where, "settings: ", e.what());
  }
  return s;
}

// How the index compares vectors: cosine (unit vectors, inner product) unless the
// sentence-transformers config names dot or euclidean.
std::string metric_for(const LoadedModel& m) {
  const std::string sim = m.sentence ? m.sentence->similarity : "cosine";
  if (sim == "cosine" || sim == "dot" || sim == "euclidean") return sim;
  fail("index", "similarity_fn_name '", sim, "' is not supported for an index (cosine, dot, euclidean)");
}

EmbedOptions embed_options_for(const std::string& metric, EmbedOptions o) {
  o.normalize = metric == "cosine";
  return o;
}

std::vector<float> probe_vector(LoadedModel& m, const std::string& metric) {
  return embed(m, {kProbe}, embed_options_for(metric, {}))[0];
}

double cosine(const std::vector<float>& a, const std::vector<float>& b) {
  double ab = 0, aa = 0, bb = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    ab += static_cast<double>(a[i]) * b[i];
    aa += static_cast<double>(a[i]) * a[i];
    bb += static_cast<double>(b[i]) * b[i];
  }
  return ab / std::max(std::sqrt(aa * bb), 1e-30);
}

// The recorded probe vector against this encoder's: another model (or the same one with other
// pooling) gives a different vector; a quantized copy of the same weights stays within 1e-2.
void check_probe(const Json& encoder, LoadedModel& m, const std::string& where) {
  const auto dim = encoder.value("dimension", std::int64_t{0});
  const std::vector<float> recorded = encoder.value("probe", std::vector<float>{});
  const std::vector<float> now = probe_vector(m, encoder.value("similarity", std::string("cosine")));
  TFM_CHECK(static_cast<std::int64_t>(now.size()) == dim, where, "was built by an encoder of dimension ", dim,
            "; this one gives ", now.size());
  TFM_CHECK(recorded.size() == now.size() && cosine(recorded, now) > 0.99, where,
            "was built by another encoder (", encoder.value("path", std::string("?")),
            "): this one's vectors differ; rebuild the index or give that encoder");
}

void append_file(const std::string& path, const std::string& bytes) {
  std::FILE* f = std::fopen(path.c_str(), "ab");
  TFM_CHECK(f != nullptr, path, "cannot open for writing");
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size() && std::fflush(f) == 0;
  std::fclose(f);
  TFM_CHECK(ok, path, "write failed (disk full?)");
}

std::int64_t file_size_or_zero(const std::string& path) {
  std::error_code ec;
  const auto n = fs::file_size(path, ec);
  return ec ? 0 : static_cast<std::int64_t>(n);
}

std::string passage_line(const Passage& p) {
  return Json{{"id", p.id}, {"text", p.text}}.dump(-1, ' ', false, Json::error_handler_t::strict) + "\n";
}

struct Measured {
  double recall = 1.0, query_ms = 0;
};

// recall@10 of `index` against exact search on up to 200 of the stored vectors as queries, and
// the mean time of one query's search.
Measured measure(const VectorIndex& index, const std::vector<float>& vecs, std::int64_t n, std::int64_t dim,
                 bool inner_product) {
  Measured m;
  if (n == 0) return m;
  const std::int64_t nq = std::min<std::int64_t>(200, n), k = std::min<std::int64_t>(10, n);
  std::vector<float> queries;
  for (std::int64_t i = 0; i < nq; ++i) {
    const std::int64_t row = i * n / nq;
    queries.insert(queries.end(), vecs.begin() + row * dim, vecs.begin() + (row + 1) * dim);
  }
  std::vector<float> s_exact, s_approx;
  std::vector<std::int64_t> exact, approx;
  if (index.type() != IndexType::flat) {
    VectorIndex flat(IndexType::flat, dim, inner_product, {}, n);
    flat.add(vecs.data(), n);
    flat.search(queries.data(), nq, k, s_exact, exact);
  }
  const auto t0 = std::chrono::steady_clock::now();
  for (std::int64_t i = 0; i < nq; ++i) {
    std::vector<float> s;
    std::vector<std::int64_t> ids;
    index.search(queries.data() + i * dim, 1, k, s, ids);
    approx.insert(approx.end(), ids.begin(), ids.end());
  }
  m.query_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
               static_cast<double>(nq);
  if (index.type() == IndexType::flat) return m;
  std::int64_t found = 0;
  for (std::int64_t i = 0; i < nq; ++i) {
    const std::set<std::int64_t> truth(exact.begin() + i * k, exact.begin() + (i + 1) * k);
    for (std::int64_t j = 0; j < k; ++j) found += truth.count(approx[static_cast<std::size_t>(i * k + j)]) ? 1 : 0;
  }
  m.recall = static_cast<double>(found) / static_cast<double>(nq * k);
  return m;
}

}  // namespace

IndexReport build_index(LoadedModel& encoder, const std::string& encoder_path, const std::vector<Passage>& passages,
                        const std::string& dir, const IndexBuildOptions& o) {
  TFM_CHECK(o.batch > 0 && o.checkpoint > 0, "index", "batch and checkpoint must be positive");
  fs::create_directories(dir);
  const std::string manifest_path = join(dir, kManifest);
  const std::string metric = metric_for(encoder);
  const EmbedOptions eo = embed_options_for(metric, o.embed);
  const std::string crc = corpus_crc(passages);
  Json m;
  std::int64_t base = 0, done = 0;  // rows before this run; rows of this run already written
  IndexReport report;
  if (fs::exists(manifest_path)) {
    m = read_manifest(dir);
    check_probe(m["encoder"], encoder, dir);
    const std::string stored_type = m["type"].get<std::string>();
    TFM_CHECK(stored_type == index_type_name(o.type), dir, "holds a ", stored_type, " index; asked for ",
              index_type_name(o.type));
    const Json run = m.value("run", Json::object());
    const bool complete = m.value("complete", false);
    if (!complete) {
      TFM_CHECK(run.value("crc", "") == crc && run.value("total", std::int64_t{-1}) == static_cast<std::int64_t>(passages.size()),
                dir, "holds an unfinished build of another corpus: give the same input to resume it, or remove ", dir);
      base = run.value("base", std::int64_t{0});
      done = m["count"].get<std::int64_t>() - base;
      report.resumed_from = done;
    } else {
      TFM_CHECK(o.add, dir, "already holds an index of ", m["count"].get<std::int64_t>(),
                " passages: --add adds to it; remove the directory to build anew");
      base = m["count"].get<std::int64_t>();
    }
  } else {
    TFM_CHECK(!o.add, dir, "--add needs an existing index; there is none");
    const std::vector<float> probe = probe_vector(encoder, metric);
    m = {{"format", "tfm-index"},
         {"version", 1},
         {"encoder",
          {{"path", encoder_path},
           {"model_type", encoder.config.model_type},
           {"dimension", static_cast<std::int64_t>(probe.size())},
           {"similarity", metric},
           {"probe", probe}}},
         {"type", index_type_name(o.type)},
         {"metric", metric == "euclidean" ? "l2" : "ip"},
         {"settings", settings_json(o.settings)},
         {"count", 0},
         {"files", Json::object()}};
    // Leftovers of a directory whose manifest never got written.
    for (const char* f : {kPassages, kVectors, kIndex}) fs::remove(join(dir, f));
  }
  const auto dim = m["encoder"]["dimension"].get<std::int64_t>();
  // The files as the last checkpoint left them (a crash may have appended past it).
  const std::int64_t rows = base + done;
  const std::int64_t vec_bytes = rows * dim * 4;
  const std::int64_t text_bytes = m["files"].value(kPassages, Json::object()).value("bytes", std::int64_t{0});
  TFM_CHECK(file_size_or_zero(join(dir, kVectors)) >= vec_bytes && file_size_or_zero(join(dir, kPassages)) >= text_bytes,
            dir, "its files are shorter than index.json records: the directory is damaged; remove it and build again");
  if (fs::exists(join(dir, kVectors))) fs::resize_file(join(dir, kVectors), static_cast<std::uintmax_t>(vec_bytes));
  if (fs::exists(join(dir, kPassages))) fs::resize_file(join(dir, kPassages), static_cast<std::uintmax_t>(text_bytes));

  auto checkpoint = [&](std::int64_t written, bool complete) {
    m["count"] = base + written;
    m["complete"] = complete;
    m["run"] = {{"base", base}, {"total", static_cast<std::int64_t>(passages.size())}, {"crc", crc}};
    m["files"][kPassages] = {{"bytes", file_size_or_zero(join(dir, kPassages))}};
    if (complete) m["files"][kPassages]["crc32"] = crc_hex(read_file(join(dir, kPassages)));
    m["files"][kVectors] = {{"bytes", file_size_or_zero(join(dir, kVectors))}};
    write_file_atomic(manifest_path, m.dump(2));
  };
  const auto total = static_cast<std::int64_t>(passages.size());
  if (o.progress) o.progress(done, total);
  for (std::int64_t at = done; at < total;) {
    std::string text_out, vec_out;
    const std::int64_t stop = std::min(total, at + o.checkpoint);
    for (std::int64_t b = at; b < stop; b += o.batch) {
      std::vector<std::string> texts;
      for (std::int64_t i = b; i < std::min(stop, b + o.batch); ++i) texts.push_back(passages[static_cast<std::size_t>(i)].text);
      const auto vecs = embed(encoder, texts, eo);
      for (std::size_t i = 0; i < vecs.size(); ++i) {
        text_out += passage_line(passages[static_cast<std::size_t>(b) + i]);
        vec_out.append(reinterpret_cast<const char*>(vecs[i].data()), vecs[i].size() * sizeof(float));
      }
      if (o.progress) o.progress(b + static_cast<std::int64_t>(texts.size()), total);
    }
    append_file(join(dir, kVectors), vec_out);
    append_file(join(dir, kPassages), text_out);
    at = stop;
    checkpoint(at, false);
  }
  // Every stored vector into a fresh index of the asked type (an --add rebuilds it whole, so
  // IVF-PQ relearns its lists from the grown corpus).
  const std::int64_t n = base + total;
  const std::string vbytes = read_file(join(dir, kVectors));
  TFM_CHECK(static_cast<std::int64_t>(vbytes.size()) == n * dim * 4, join(dir, kVectors), "holds ", vbytes.size(),
            " bytes; ", n, " vectors of ", dim, " need ", n * dim * 4);
  std::vector<float> vecs(static_cast<std::size_t>(n * dim));
  std::memcpy(vecs.data(), vbytes.data(), vbytes.size());
  const bool ip = metric != "euclidean";
  VectorIndex index(o.type, dim, ip, settings_from(m["settings"], manifest_path), n);
  if (n > 0) {
    index.train(vecs.data(), n);
    index.add(vecs.data(), n);
  }
  const Measured meas = measure(index, vecs, n, dim, ip);
  const std::string ibytes = index.serialize();
  write_file_atomic(join(dir, kIndex), ibytes);
  m["settings"] = settings_json(index.settings());
  m["recall_at_10"] = meas.recall;
  m["query_ms"] = meas.query_ms;
  m["files"][kIndex] = {{"bytes", static_cast<std::int64_t>(ibytes.size())}, {"crc32", crc_hex(ibytes)}};
  checkpoint(total, true);
  report.count = n;
  report.added = total - report.resumed_from;
  report.recall_at_10 = meas.recall;
  report.query_ms = meas.query_ms;
  return report;
}

bool PassageIndex::complete(const std::string& dir) {
  return fs::exists(join(dir, kManifest)) && read_manifest(dir).value("complete", false);
}

PassageIndex PassageIndex::open(const std::string& dir) {
  TFM_CHECK(fs::is_directory(dir), dir, "is not an index directory");
  const Json m = read_manifest(dir);
  const std::string where = join(dir, kManifest);
  PassageIndex p;
  p.dir_ = dir;
  try {
    TFM_CHECK(m.value("complete", false), dir, "holds an unfinished build (", m["count"].get<std::int64_t>(),
              " passages so far): run `tfm index build` again with the same input to finish it");
    p.encoder_path_ = m["encoder"].value("path", std::string());
    p.probe_ = m["encoder"].value("probe", std::vector<float>{});
    const std::string similarity = m["encoder"].value("similarity", std::string("cosine"));
    p.normalize_ = similarity == "cosine";
    TFM_CHECK(m["metric"].get<std::string>() == (similarity == "euclidean" ? "l2" : "ip"), where, "metric \"",
              m["metric"].get<std::string>(), "\" does not fit the encoder's similarity \"", similarity, "\"");
    const auto count = m["count"].get<std::int64_t>();
    const auto dim = m["encoder"]["dimension"].get<std::int64_t>();
    auto checked = [&](const char* name) {
      const std::string path = join(dir, name);
      const std::string bytes = read_file(path);
      const Json& f = m["files"][name];
      TFM_CHECK(static_cast<std::int64_t>(bytes.size()) == f.value("bytes", std::int64_t{-1}), path, "holds ",
                bytes.size(), " bytes; index.json records ", f.value("bytes", std::int64_t{-1}), " (a damaged index)");
      TFM_CHECK(f.value("crc32", std::string()) == crc_hex(bytes), path, "fails its checksum (a damaged index)");
      return bytes;
    };
    const std::string text = checked(kPassages);
    std::size_t at = 0;
    for (std::int64_t line = 1; at < text.size(); ++line) {
      const std::size_t nl = text.find('\n', at);
      const Json j = Json::parse(text.substr(at, nl - at));
      p.passages_.push_back({j.at("id").get<std::string>(), j.at("text").get<std::string>()});
      at = nl == std::string::npos ? text.size() : nl + 1;
    }
    TFM_CHECK(static_cast<std::int64_t>(p.passages_.size()) == count, join(dir, kPassages), "holds ",
              p.passages_.size(), " passages; index.json records ", count);
    const IndexType type = index_type_from_name(m["type"].get<std::string>());
    p.index_ = std::make_shared<VectorIndex>(VectorIndex::deserialize(
        checked(kIndex), join(dir, kIndex), type, settings_from(m["settings"], where), dim, m["metric"].get<std::string>() != "l2"));
    TFM_CHECK(p.index_->size() == count && p.index_->dimension() == dim, join(dir, kIndex), "holds ", p.index_->size(),
              " vectors of ", p.index_->dimension(), "; index.json records ", count, " of ", dim);
  } catch (const Json::exception& e) {
    fail(where, "unexpected content: ", e.what());
  }
  return p;
}

void PassageIndex::check_encoder(LoadedModel& encoder) const {
  check_probe(read_manifest(dir_)["encoder"], encoder, dir_);
}

std::vector<std::vector<SearchHit>> PassageIndex::search(LoadedModel& encoder, const std::vector<std::string>& queries,
                                                         std::int64_t k, const EmbedOptions& embed_options) const {
  TFM_CHECK(k > 0, "search", "k must be positive");
  if (queries.empty()) return {};
  EmbedOptions eo = embed_options;
  eo.normalize = normalize_;
  const auto vecs = embed(encoder, queries, eo);
  const std::int64_t dim = index_->dimension();
  std::vector<float> q;
  for (const auto& v : vecs) {
    TFM_CHECK(static_cast<std::int64_t>(v.size()) == dim, "search", "the encoder gives ", v.size(),
              " dimensions; the index holds ", dim);
    q.insert(q.end(), v.begin(), v.end());
  }
  const std::int64_t kk = std::min<std::int64_t>(k, std::max<std::int64_t>(size(), 1));
  std::vector<float> scores;
  std::vector<std::int64_t> ids;
  index_->search(q.data(), static_cast<std::int64_t>(queries.size()), kk, scores, ids);
  std::vector<std::vector<SearchHit>> out(queries.size());
  for (std::size_t i = 0; i < queries.size(); ++i)
    for (std::int64_t j = 0; j < kk; ++j) {
      const std::int64_t row = ids[i * static_cast<std::size_t>(kk) + static_cast<std::size_t>(j)];
      if (row < 0 || row >= size()) continue;
      const Passage& p = passages_[static_cast<std::size_t>(row)];
      out[i].push_back({row, p.id, p.text, scores[i * static_cast<std::size_t>(kk) + static_cast<std::size_t>(j)]});
    }
  return out;
}

}  // namespace tfm
