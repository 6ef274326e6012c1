// VectorIndex: exact search (FAISS's IndexFlat) and IVF-PQ re-ranked by exact distance
// (IndexRefineFlat over IndexIVFPQ) on Debian's libfaiss-dev; HNSW on Debian's hnswlib
// (libhnswlib-dev), which built and searched 20,000 vectors of 384 numbers 5.5x and 2.7x faster
// than FAISS's IndexHNSWFlat at the same M and ef (docs/retrieval.md, docs/benchmarks.md).
#include <hnswlib/hnswlib.h>
#include <omp.h>

#include <faiss/IndexFlat.h>
#include <faiss/IndexIVFPQ.h>
#include <faiss/IndexRefine.h>
#include <faiss/impl/FaissException.h>
#include <faiss/impl/io.h>
#include <faiss/index_io.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <limits>
#include <fstream>
#include <unistd.h>

#include "tfm/error.h"
#include "tfm/retrieval.h"
#include "tfm/runtime.h"
#include "tfm/safetensors.h"

namespace tfm {

struct VectorIndex::Impl {
  std::unique_ptr<faiss::Index> index;  // flat, ivfpq
  // hnsw: the space (its distance function) outlives the graph that points to it.
  std::unique_ptr<hnswlib::SpaceInterface<float>> space;
  std::unique_ptr<hnswlib::HierarchicalNSW<float>> hnsw;
};

IndexType index_type_from_name(const std::string& name) {
  if (name == "flat") return IndexType::flat;
  if (name == "hnsw") return IndexType::hnsw;
  if (name == "ivfpq") return IndexType::ivfpq;
  fail("index", "unknown index type '", name, "' (flat, hnsw, ivfpq)");
}

const char* index_type_name(IndexType t) {
  switch (t) {
    case IndexType::flat: return "flat";
    case IndexType::hnsw: return "hnsw";
    case IndexType::ivfpq: return "ivfpq";
  }
  return "?";
}

namespace {

// FAISS reports misuse by throwing its own exception; the engine's callers get tfm::Error.
template <class Fn>
auto faiss_call(const std::string& where, Fn&& fn) {
  try {
    return fn();
  } catch (const faiss::FaissException& e) {
    fail(where, "FAISS: ", e.msg);
  }
}

std::int64_t pq_subvectors(std::int64_t dim, std::int64_t asked) {
  if (asked > 0) return asked;
  for (std::int64_t m = std::max<std::int64_t>(1, dim / 2); m > 1; --m)
    if (dim % m == 0) return m;
  return 1;
}

IndexSettings with_defaults(IndexType type, std::int64_t dim, IndexSettings s, std::int64_t n) {
  if (type == IndexType::hnsw) {
    if (s.hnsw_m <= 0) s.hnsw_m = 32;
    if (s.ef_construction <= 0) s.ef_construction = 80;
    if (s.ef_search <= 0) s.ef_search = 128;
  } else if (type == IndexType::ivfpq) {
    if (s.nlist <= 0)
      s.nlist = std::clamp<std::int64_t>(std::llround(4 * std::sqrt(static_cast<double>(std::max<std::int64_t>(n, 1)))), 1,
                                         std::max<std::int64_t>(1, n / 39));
    s.pq_m = pq_subvectors(dim, s.pq_m);
    if (s.nprobe <= 0) s.nprobe = std::max<std::int64_t>(1, s.nlist / 4);
    if (s.refine <= 0) s.refine = 10;
  }
  return s;
}

// Bits a PQ code: 8 (256 centroids) once there are enough vectors to learn them, fewer below.
int pq_bits(std::int64_t n) {
  int b = 8;
  while (b > 4 && n < (std::int64_t{1} << b) * 4) --b;
  return b;
}

std::unique_ptr<hnswlib::SpaceInterface<float>> hnsw_space(std::int64_t dim, bool inner_product) {
  if (inner_product) return std::make_unique<hnswlib::InnerProductSpace>(static_cast<std::size_t>(dim));
  return std::make_unique<hnswlib::L2Space>(static_cast<std::size_t>(dim));
}

// hnswlib 0.6 reads and writes files only: its bytes pass through a private temporary file.
std::string temp_path() {
  static std::atomic<int> n{0};
  return (std::filesystem::temp_directory_path() /
          ("tfm_hnsw_" + std::to_string(::getpid()) + "_" + std::to_string(n++) + ".bin")).string();
}

void apply_search_settings(faiss::Index* index, IndexType type, const IndexSettings& s) {
  if (type == IndexType::ivfpq) {
    if (auto* r = dynamic_cast<faiss::IndexRefine*>(index)) {
      r->k_factor = static_cast<float>(s.refine);
      if (auto* ivf = dynamic_cast<faiss::IndexIVF*>(r->base_index)) ivf->nprobe = static_cast<std::size_t>(s.nprobe);
    }
  }
}

}  // namespace

VectorIndex::VectorIndex(IndexType type, std::int64_t dim, bool inner_product, IndexSettings settings,
                         std::int64_t expected_count)
    : impl_(std::make_unique<Impl>()), type_(type), dim_(dim), inner_product_(inner_product) {
  TFM_CHECK(dim > 0, "index", "dimension must be positive");
  settings_ = with_defaults(type, dim, settings, expected_count);
  const faiss::MetricType metric = inner_product ? faiss::METRIC_INNER_PRODUCT : faiss::METRIC_L2;
  faiss_call("index", [&] {
    switch (type) {
      case IndexType::flat: impl_->index = std::make_unique<faiss::IndexFlat>(dim, metric); break;
      case IndexType::hnsw: {
        impl_->space = hnsw_space(dim, inner_product);
        impl_->hnsw = std::make_unique<hnswlib::HierarchicalNSW<float>>(
            impl_->space.get(), static_cast<std::size_t>(std::max<std::int64_t>(expected_count, 1)),
            static_cast<std::size_t>(settings_.hnsw_m), static_cast<std::size_t>(settings_.ef_construction));
        impl_->hnsw->setEf(static_cast<std::size_t>(settings_.ef_search));
        return 0;
      }
      case IndexType::ivfpq: {
        TFM_CHECK(dim % settings_.pq_m == 0, "index", "PQ sub-vectors ", settings_.pq_m, " do not divide the dimension ", dim);
        auto* quantizer = new faiss::IndexFlat(dim, metric);
        auto* ivf = new faiss::IndexIVFPQ(quantizer, dim, static_cast<std::size_t>(settings_.nlist),
                                          static_cast<std::size_t>(settings_.pq_m),
                                          static_cast<std::size_t>(pq_bits(expected_count)), metric);
        ivf->own_fields = true;
        auto refine = std::make_unique<faiss::IndexRefineFlat>(ivf);
        refine->own_fields = true;
        impl_->index = std::move(refine);
        break;
      }
    }
    apply_search_settings(impl_->index.get(), type, settings_);
    return 0;
  });
}

VectorIndex::~VectorIndex() = default;
VectorIndex::VectorIndex(VectorIndex&&) noexcept = default;
VectorIndex& VectorIndex::operator=(VectorIndex&&) noexcept = default;

void VectorIndex::train(const float* x, std::int64_t n) {
  if (impl_->hnsw || impl_->index->is_trained) return;
  if (type_ == IndexType::ivfpq) {
    const auto* refine = dynamic_cast<const faiss::IndexRefine*>(impl_->index.get());
    const auto* ivf = dynamic_cast<const faiss::IndexIVFPQ*>(refine->base_index);
    const std::int64_t need = std::max<std::int64_t>(static_cast<std::int64_t>(ivf->nlist),
                                                     std::int64_t{1} << ivf->pq.nbits);
    TFM_CHECK(n >= need, "index", "IVF-PQ with ", ivf->nlist, " lists and ", ivf->pq.nbits, "-bit codes learns from at least ",
              need, " vectors; the corpus has ", n, " (use --type flat or hnsw for a corpus this small)");
  }
  faiss_call("index", [&] {
    impl_->index->train(n, x);
    return 0;
  });
}

void VectorIndex::add(const float* x, std::int64_t n) {
  if (impl_->hnsw) {
    // Points go in on the engine's threads (hnswlib's insertion is thread-safe); with more
    // than one the graph depends on their interleaving, as in hnswlib's own Python add_items.
    auto& h = *impl_->hnsw;
    const std::size_t first = h.cur_element_count;
    try {
      if (first + static_cast<std::size_t>(n) > h.max_elements_) h.resizeIndex(first + static_cast<std::size_t>(n));
    } catch (const std::exception& e) {
      fail("index", "hnswlib: ", e.what());
    }
    std::atomic<bool> failed{false};
    std::string why;
#pragma omp parallel for schedule(dynamic, 64) num_threads(num_threads())
    for (std::int64_t i = 0; i < n; ++i) {
      try {
        h.addPoint(x + i * dim_, first + static_cast<std::size_t>(i));
      } catch (const std::exception& e) {
#pragma omp critical
        why = e.what();
        failed = true;
      }
    }
    TFM_CHECK(!failed, "index", "hnswlib: ", why);
    return;
  }
  TFM_CHECK(impl_->index->is_trained, "index", "the index must be trained before vectors are added");
  faiss_call("index", [&] {
    impl_->index->add(n, x);
    return 0;
  });
}

std::int64_t VectorIndex::size() const {
  return impl_->hnsw ? static_cast<std::int64_t>(impl_->hnsw->cur_element_count) : impl_->index->ntotal;
}

void VectorIndex::search(const float* q, std::int64_t nq, std::int64_t k, std::vector<float>& scores,
                         std::vector<std::int64_t>& ids) const {
  TFM_CHECK(k > 0, "search", "k must be positive");
  if (impl_->hnsw) {
    scores.assign(static_cast<std::size_t>(nq * k), -std::numeric_limits<float>::infinity());
    ids.assign(static_cast<std::size_t>(nq * k), -1);
    for (std::int64_t r = 0; r < nq; ++r) {
      auto heap = impl_->hnsw->searchKnn(q + r * dim_, static_cast<std::size_t>(k));  // farthest on top
      for (auto j = static_cast<std::int64_t>(heap.size()) - 1; j >= 0; --j, heap.pop()) {
        const auto [dist, label] = heap.top();
        const auto at = static_cast<std::size_t>(r * k + j);
        ids[at] = static_cast<std::int64_t>(label);
        // InnerProductSpace gives 1 - <q, x>; L2Space the squared distance.
        scores[at] = inner_product_ ? 1.0f - dist : -dist;
      }
    }
    return;
  }
  scores.assign(static_cast<std::size_t>(nq * k), 0.0f);
  std::vector<faiss::Index::idx_t> labels(static_cast<std::size_t>(nq * k), -1);
  faiss_call("search", [&] {
    impl_->index->search(nq, q, k, scores.data(), labels.data());
    return 0;
  });
  ids.assign(labels.begin(), labels.end());
  if (!inner_product_)
    for (float& s : scores) s = -s;  // FAISS gives squared L2 distances: closer is smaller
}

std::string VectorIndex::serialize() const {
  if (impl_->hnsw) {
    const std::string path = temp_path();
    try {
      impl_->hnsw->saveIndex(path);
    } catch (const std::exception& e) {
      std::filesystem::remove(path);
      fail("index", "hnswlib: ", e.what());
    }
    std::string bytes = read_file(path);
    std::filesystem::remove(path);
    return bytes;
  }
  faiss::VectorIOWriter w;
  faiss_call("index", [&] {
    faiss::write_index(impl_->index.get(), &w);
    return 0;
  });
  return std::string(w.data.begin(), w.data.end());
}

VectorIndex VectorIndex::deserialize(const std::string& bytes, const std::string& where, IndexType type,
                                     IndexSettings settings, std::int64_t dim, bool inner_product) {
  if (type == IndexType::hnsw) {
    VectorIndex v(type, dim, inner_product, settings, 1);
    const std::string path = temp_path();
    {
      std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    try {
      v.impl_->hnsw = std::make_unique<hnswlib::HierarchicalNSW<float>>(v.impl_->space.get(), path);
    } catch (const std::exception& e) {
      std::filesystem::remove(path);
      fail(where, "not an HNSW index of hnswlib's format: ", e.what());
    }
    std::filesystem::remove(path);
    // The file's own record sizes against the vectors' width (hnswlib takes the width from the
    // space, not the file).
    const auto& h = *v.impl_->hnsw;
    const std::size_t data = static_cast<std::size_t>(dim) * sizeof(float);
    TFM_CHECK(h.size_data_per_element_ == h.size_links_level0_ + data + sizeof(hnswlib::labeltype) &&
                  h.label_offset_ == h.size_links_level0_ + data && h.offsetData_ == h.size_links_level0_,
              where, "holds vectors of another width than ", dim);
    v.impl_->hnsw->setEf(static_cast<std::size_t>(v.settings_.ef_search));
    return v;
  }
  faiss::VectorIOReader r;
  r.data.assign(bytes.begin(), bytes.end());
  std::unique_ptr<faiss::Index> index(faiss_call(where, [&] { return faiss::read_index(&r); }));
  const bool ip = index->metric_type == faiss::METRIC_INNER_PRODUCT;
  const bool matches = type == IndexType::flat ? dynamic_cast<faiss::IndexFlat*>(index.get()) != nullptr
                                               : dynamic_cast<faiss::IndexRefine*>(index.get()) != nullptr;
  TFM_CHECK(matches, where, "holds another kind of index than the ", index_type_name(type), " index.json names");
  TFM_CHECK(index->d == dim && ip == inner_product, where, "holds ", index->d, "-number vectors compared by ",
            ip ? "inner product" : "L2", "; index.json names ", dim, " and ", inner_product ? "inner product" : "L2");
  VectorIndex v(type, index->d, ip, settings, index->ntotal);
  v.impl_->index = std::move(index);
  v.settings_ = settings;
  apply_search_settings(v.impl_->index.get(), type, settings);
  return v;
}

}  // namespace tfm
