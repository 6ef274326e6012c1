// Attention captured on a model split over processes (Model::set_attention_capture): each
// tensor-parallel shard records its heads of every layer, each pipeline stage its layers. Before
// forward() or encode() returns, the shards' heads are put together (each shard's in its place
// of a zero tensor of all heads, summed over the shards: a sum with zeros is exact) and the
// stages' layers handed to every stage (each stage broadcasts its own in turn), in one
// process's order: encoder layers, then per decoder layer its self- and cross-attention. Every
// rank then holds what one process captures, so inspection (attention maps, rollouts, Whisper's
// word timestamps) runs on every rank as it does in one.
#include <algorithm>

#include "models/model_impl.h"
#include "tfm/error.h"
#include "tfm/ops.h"

namespace tfm::model_detail {
namespace {

// One process's call order: the encoder's layers, then the decoder's, self before cross.
int order_of(const AttentionMap& a) {
  return (a.stack == "encoder" ? 0 : 2) + (a.kind == "cross" ? 1 : 0);
}

// A map's header as floats: stack and kind, layer, the weights' four sizes.
Tensor header_of(const AttentionMap& a) {
  const Tensor& w = a.weights;
  return Tensor::from_floats({a.stack == "encoder" ? 0.0f : 1.0f, a.kind == "cross" ? 1.0f : 0.0f, static_cast<float>(a.layer),
                              static_cast<float>(w.size(0)), static_cast<float>(w.size(1)), static_cast<float>(w.size(2)),
                              static_cast<float>(w.size(3))},
                             {7});
}

}  // namespace

void gather_captured_attention(const Model::Impl& m, std::vector<AttentionMap>& maps, std::size_t from) {
  if (m.tp_ranks > 1) {
    for (std::size_t i = from; i < maps.size(); ++i) {
      AttentionMap& a = maps[i];
      const Tensor w = contiguous(a.weights);
      const std::int64_t H = w.size(1);
      if (a.heads_total <= H) continue;  // (a layer every shard holds whole)
      const std::int64_t B = w.size(0), Tq = w.size(2), Tk = w.size(3), block = Tq * Tk;
      Tensor whole = Tensor::zeros({B, a.heads_total, Tq, Tk});
      for (std::int64_t b = 0; b < B; ++b)
        std::copy_n(w.data<float>() + b * H * block, H * block, whole.data<float>() + (b * a.heads_total + a.head_offset) * block);
      (*m.tp_sum)(whole);
      a.weights = whole;
      a.head_offset = 0;
      a.heads_total = 0;
    }
  }
  if (m.pp_stages <= 1) return;
  std::vector<AttentionMap> all;
  for (int s = 0; s < m.pp_stages; ++s) {
    const bool mine = s == m.pp_stage;
    Tensor count = Tensor::from_floats({mine ? static_cast<float>(maps.size() - from) : 0.0f}, {1});
    m.pp->broadcast(count, s);
    const auto n = static_cast<std::size_t>(count.data<float>()[0]);
    for (std::size_t k = 0; k < n; ++k) {
      Tensor header = mine ? header_of(maps[from + k]) : Tensor::zeros({7});
      m.pp->broadcast(header, s);
      const float* h = header.data<float>();
      AttentionMap a;
      a.stack = h[0] == 0.0f ? "encoder" : "decoder";
      a.kind = h[1] == 0.0f ? "self" : "cross";
      a.layer = static_cast<std::int64_t>(h[2]);
      a.weights = mine ? contiguous(maps[from + k].weights)
                       : Tensor::empty({static_cast<std::int64_t>(h[3]), static_cast<std::int64_t>(h[4]),
                                        static_cast<std::int64_t>(h[5]), static_cast<std::int64_t>(h[6])});
      m.pp->broadcast(a.weights, s);
      all.push_back(std::move(a));
    }
  }
  std::stable_sort(all.begin(), all.end(), [](const AttentionMap& a, const AttentionMap& b) {
    const int x = order_of(a) / 2, y = order_of(b) / 2;  // the stack first, then the layer, then self/cross
    if (x != y) return x < y;
    if (a.layer != b.layer) return a.layer < b.layer;
    return order_of(a) < order_of(b);
  });
  maps.resize(from);
  for (AttentionMap& a : all) maps.push_back(std::move(a));
}

}  // namespace tfm::model_detail
