// VectorIndex over FAISS (Debian's libfaiss-dev): exact (IndexFlat), HNSW (IndexHNSWFlat) and
// IVF-PQ re-ranked by exact distance (IndexRefineFlat over IndexIVFPQ). docs/retrieval.md says
// why FAISS rather than hnswlib (measured: hnswlib 0.6.2's fast path reads past its link lists).
#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/IndexIVFPQ.h>
#include <faiss/IndexRefine.h>
#include <faiss/impl/FaissException.h>
#include <faiss/impl/io.h>
#include <faiss/index_io.h>

#include <algorithm>
#include <cmath>

#include "tfm/error.h"
#include "tfm/retrieval.h"

namespace tfm {

struct VectorIndex::Impl {
  std::unique_ptr<faiss::Index> index;
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

void apply_search_settings(faiss::Index* index, IndexType type, const IndexSettings& s) {
  if (type == IndexType::hnsw) {
    if (auto* h = dynamic_cast<faiss::IndexHNSW*>(index)) h->hnsw.efSearch = static_cast<int>(s.ef_search);
  } else if (type == IndexType::ivfpq) {
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
        auto h = std::make_unique<faiss::IndexHNSWFlat>(static_cast<int>(dim), static_cast<int>(settings_.hnsw_m), metric);
        h->hnsw.efConstruction = static_cast<int>(settings_.ef_construction);
        impl_->index = std::move(h);
        break;
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
  if (impl_->index->is_trained) return;
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
  TFM_CHECK(impl_->index->is_trained, "index", "the index must be trained before vectors are added");
  faiss_call("index", [&] {
    impl_->index->add(n, x);
    return 0;
  });
}

std::int64_t VectorIndex::size() const { return impl_->index->ntotal; }

void VectorIndex::search(const float* q, std::int64_t nq, std::int64_t k, std::vector<float>& scores,
                         std::vector<std::int64_t>& ids) const {
  TFM_CHECK(k > 0, "search", "k must be positive");
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
  faiss::VectorIOWriter w;
  faiss_call("index", [&] {
    faiss::write_index(impl_->index.get(), &w);
    return 0;
  });
  return std::string(w.data.begin(), w.data.end());
}

VectorIndex VectorIndex::deserialize(const std::string& bytes, const std::string& where, IndexType type,
                                     IndexSettings settings, std::int64_t dim, bool inner_product) {
  faiss::VectorIOReader r;
  r.data.assign(bytes.begin(), bytes.end());
  std::unique_ptr<faiss::Index> index(faiss_call(where, [&] { return faiss::read_index(&r); }));
  const bool ip = index->metric_type == faiss::METRIC_INNER_PRODUCT;
  const bool matches = type == IndexType::flat     ? dynamic_cast<faiss::IndexFlat*>(index.get()) != nullptr
                       : type == IndexType::hnsw   ? dynamic_cast<faiss::IndexHNSWFlat*>(index.get()) != nullptr
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
