// tfm bench embed — sentence embeddings/s of a BERT-base-shaped encoder (the bert preset:
//   12 layers of width 768, random weights; 32-token texts plus [CLS]/[SEP]), forward + mean
//   pooling + normalisation, at batch 1 and 64 on 1 and all threads, with the weight matrices
//   in f32, bf16 and q8_0 (`--dtype` at load), beside the same
//   computation in PyTorch (bench/peers/torch/bench_torch_embed.py, written as transformers'
//   BertModel computes it). Tokenisation is not timed on either side.
// tfm bench index — FAISS through tfm's VectorIndex (flat, HNSW, IVF-PQ at the defaults `tfm
//   index build` uses) beside FAISS's own Python (bench/peers/faiss/bench_faiss_index.py) on
//   the same 20,000 random unit vectors of 384 numbers: build seconds, one query's latency
//   (1,000 queries one at a time, k = 10) and recall@10 against exact search.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "bench_util.h"
#include "tfm/autograd.h"
#include "tfm/dtype.h"
#include "tfm/model.h"
#include "tfm/ops.h"
#include "tfm/retrieval.h"
#include "tfm/runtime.h"
#include "tfm/safetensors.h"

namespace tfm::cli {

void run_bench_embed(const BenchOptions& o, int threads) {
  std::vector<int> tcs = {1};
  if (threads > 1) tcs.push_back(threads);
  const std::vector<std::int64_t> batches = {1, 64};
  const std::int64_t T = 34;
  std::map<std::pair<std::int64_t, int>, double> torch;
  std::string note, why;
  if (o.torch) {
    const auto j = run_torch_script("bench_torch_embed.py", "--tokens " + std::to_string(T) + " --threads 1," +
                                                                std::to_string(threads) + " --min-time " +
                                                                std::to_string(o.min_time) + " --min-reps " +
                                                                std::to_string(o.min_reps), why);
    try {
      for (const auto& r : j.at("results"))
        torch[{r.at("batch").get<std::int64_t>(), r.at("threads").get<int>()}] = r.at("texts_per_s").get<double>();
      note = "torch = PyTorch " + j.at("torch").get<std::string>() + " (BertModel's computation, f32)";
    } catch (const std::exception&) {
      note = "PyTorch column skipped: " + (why.empty() ? std::string("unexpected JSON") : why);
    }
  } else {
    note = "PyTorch column skipped (--no-torch)";
  }
  ModelConfig cfg = model_preset("bert");
  cfg.dropout = cfg.attention_dropout = cfg.embedding_dropout = 0.0;
  Model model = Model::create(cfg, 99);
  model.set_training(false);
  std::printf("\n== embed: BERT-base shape (%lld parameters, random weights), %lld tokens a text, mean pooling + "
              "L2 norm, texts/s (best of >= %d runs)\n%s\n\n",
              static_cast<long long>(model.parameter_count()), static_cast<long long>(T), o.min_reps, note.c_str());
  std::printf("%-6s %6s %8s %10s %10s %10s\n", "dtype", "batch", "threads", "ours", "torch f32", "ours/torch");
  NoGradGuard no_grad;
  for (const char* dtype : {"f32", "bf16", "q8_0"}) {
  std::map<std::string, DType> types;
  for (const auto& w : model.weight_matrices()) types[w.name] = dtype_from_name(dtype);
  model.convert_weights(types);
  for (std::int64_t b : batches) {
    std::vector<std::int64_t> ids(static_cast<std::size_t>(b * T));
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int64_t>((i * 7919) % 30000 + 100);
    ModelInputs in;
    in.input_ids = Tensor::from_ints(ids, {b, T});
    in.valid_lens = Tensor::from_ints(std::vector<std::int64_t>(static_cast<std::size_t>(b), T), {b});
    for (int t : tcs) {
      set_num_threads(t);
      const double ours = static_cast<double>(b) / best_seconds(o, [&] {
        const Tensor h = model.encode(in);  // (b, T, C)
        const Tensor pooled = mean(h, 1);   // every token is valid here
        (void)contiguous(pooled).to_floats();
      });
      const auto it = torch.find({b, t});
      std::printf("%-6s %6lld %8d %10.2f", dtype, static_cast<long long>(b), t, ours);
      if (it == torch.end()) std::printf(" %10s %10s\n", "-", "-");
      else std::printf(" %10.2f %10.2f\n", it->second, ours / it->second);
      std::fflush(stdout);
    }
  }
  }
}

void run_bench_index(const BenchOptions& o, int threads) {
  const std::int64_t n = 20000, dim = 384, nq = 1000, k = 10;
  // Random unit vectors (written to a file, so FAISS's Python reads the very same numbers).
  std::vector<float> x = Tensor::randn({n, dim}, 5).to_floats();
  for (std::int64_t i = 0; i < n; ++i) {
    double s = 0;
    for (std::int64_t j = 0; j < dim; ++j) s += static_cast<double>(x[i * dim + j]) * x[i * dim + j];
    for (std::int64_t j = 0; j < dim; ++j) x[i * dim + j] = static_cast<float>(x[i * dim + j] / std::sqrt(s));
  }
  const std::string path = (std::filesystem::temp_directory_path() / "tfm_bench_index.f32").string();
  write_file_atomic(path, std::string(reinterpret_cast<const char*>(x.data()), x.size() * sizeof(float)));
  struct Row {
    double build_s = 0, query_ms = 0, recall = 0;
  };
  std::map<std::string, Row> peer;
  std::string note, why;
  const auto j = run_torch_script("../faiss/bench_faiss_index.py", "--vectors " + path + " --n " + std::to_string(n) +
                                                                        " --dim " + std::to_string(dim) + " --queries " +
                                                                        std::to_string(nq),
                                  why);
  try {
    for (const auto& r : j.at("results"))
      peer[r.at("type").get<std::string>()] = {r.at("build_s").get<double>(), r.at("query_ms").get<double>(),
                                              r.at("recall_at_10").get<double>()};
    note = "peer = FAISS " + j.at("faiss").get<std::string>() + " from Python, the same vectors and settings";
  } catch (const std::exception&) {
    note = "FAISS Python column skipped: " + (why.empty() ? std::string("unexpected JSON") : why);
  }
  std::printf("\n== index: %lld random unit vectors of %lld, %lld queries one at a time, k = %lld, %d threads\n%s\n\n",
              static_cast<long long>(n), static_cast<long long>(dim), static_cast<long long>(nq),
              static_cast<long long>(k), threads, note.c_str());
  std::printf("%-6s %10s %10s %12s %12s %10s %10s\n", "type", "build s", "peer s", "query ms", "peer ms", "recall", "peer");
  std::vector<std::int64_t> exact;
  for (IndexType t : {IndexType::flat, IndexType::hnsw, IndexType::ivfpq}) {
    auto t0 = std::chrono::steady_clock::now();
    VectorIndex index(t, dim, true, {}, n);
    index.train(x.data(), n);
    index.add(x.data(), n);
    const double build = seconds_since(t0);
    std::vector<std::int64_t> found;
    t0 = std::chrono::steady_clock::now();
    for (std::int64_t q = 0; q < nq; ++q) {
      std::vector<float> s;
      std::vector<std::int64_t> ids;
      index.search(x.data() + q * 7 * dim, 1, k, s, ids);  // every 7th vector as a query
      found.insert(found.end(), ids.begin(), ids.end());
    }
    const double query_ms = seconds_since(t0) * 1e3 / static_cast<double>(nq);
    if (t == IndexType::flat) exact = found;
    std::int64_t hit = 0;
    for (std::int64_t q = 0; q < nq; ++q) {
      const std::set<std::int64_t> truth(exact.begin() + q * k, exact.begin() + (q + 1) * k);
      for (std::int64_t i = 0; i < k; ++i) hit += truth.count(found[static_cast<std::size_t>(q * k + i)]) ? 1 : 0;
    }
    const double recall = static_cast<double>(hit) / static_cast<double>(nq * k);
    const auto it = peer.find(index_type_name(t));
    std::printf("%-6s %10.3f", index_type_name(t), build);
    if (it == peer.end()) std::printf(" %10s %12.4f %12s %10.3f %10s\n", "-", query_ms, "-", recall, "-");
    else std::printf(" %10.3f %12.4f %12.4f %10.3f %10.3f\n", it->second.build_s, query_ms, it->second.query_ms, recall, it->second.recall);
    std::fflush(stdout);
  }
  std::filesystem::remove(path);
}

}  // namespace tfm::cli
