// Tensor parallelism (Model::shard_tensor_parallel, tfm/model.h): a model becomes one rank's
// shard by slicing the weights its layout wires, in Megatron-LM's layout: column-parallel
// query/key/value and FFN gate/up (their output rows), row-parallel attention output and FFN
// down (their input columns, summed over the ranks). The slicing walks the wired layout, not
// parameter names, so every family (fused GPT-2 c_attn, Conv1D layouts, encoder-decoders,
// RETRO's chunked cross-attention) is covered by the same few rules.
#include <cstring>
#include <set>

#include "models/model_impl.h"
#include "tfm/error.h"
#include "tfm/ops.h"

namespace tfm {
namespace {

// [begin, end) ranges of one dimension, in order.
using Ranges = std::vector<std::pair<std::int64_t, std::int64_t>>;

// The ranges of dim (0: rows, 1: columns) of a 2-D tensor of any type, concatenated. Raw
// bytes, so compact weights stay as stored: a block type's column ranges must be whole blocks.
Tensor slice_2d(const Tensor& w_in, int dim, const Ranges& ranges, const std::string& name) {
  TFM_CHECK(w_in.dim() == 2, "tensor parallel", name, " is ", w_in.str(), ", not a matrix");
  const Tensor w = w_in.is_contiguous() ? w_in : w_in.clone();
  const DType d = w.dtype();
  const std::int64_t rows = w.size(0), cols = w.size(1);
  std::int64_t kept = 0;
  for (const auto& [a, b] : ranges) {
    TFM_CHECK(a >= 0 && a < b && b <= (dim == 0 ? rows : cols), "tensor parallel", name, ": range [", a, ", ", b,
              ") is outside ", w.str());
    TFM_CHECK(dim == 0 || (a % dtype_block_elems(d) == 0 && b % dtype_block_elems(d) == 0), "tensor parallel", name,
              ": columns [", a, ", ", b, ") of a ", dtype_name(d), " matrix are not whole blocks of ",
              dtype_block_elems(d), " (use fewer ranks, or load it as f32/bf16/f16)");
    kept += b - a;
  }
  const auto row_bytes = static_cast<std::size_t>(dtype_row_bytes(d, cols));
  const auto* src = static_cast<const unsigned char*>(w.raw_data());
  Tensor out = Tensor::empty(dim == 0 ? Shape{kept, cols} : Shape{rows, kept}, d);
  auto* dst = static_cast<unsigned char*>(out.raw_data());
  if (dim == 0) {
    for (const auto& [a, b] : ranges) {
      const auto n = static_cast<std::size_t>(b - a) * row_bytes;
      std::memcpy(dst, src + static_cast<std::size_t>(a) * row_bytes, n);
      dst += n;
    }
    return out;
  }
  for (std::int64_t r = 0; r < rows; ++r) {
    for (const auto& [a, b] : ranges) {
      const auto at = static_cast<std::size_t>(dtype_row_bytes(d, a)), n = static_cast<std::size_t>(dtype_row_bytes(d, b - a));
      std::memcpy(dst, src + static_cast<std::size_t>(r) * row_bytes + at, n);
      dst += n;
    }
  }
  return out;
}

Tensor slice_1d(const Tensor& v, const Ranges& ranges, const std::string& name) {
  return reshape(slice_2d(reshape(v.is_contiguous() ? v : v.clone(), {1, v.numel()}), 1, ranges, name), {-1});
}

// dim 0 of a vector, or dim of a matrix.
Tensor slice_tensor(const Tensor& t, int dim, const Ranges& r, const std::string& name) {
  return t.dim() == 1 ? slice_1d(t, r, name) : slice_2d(t, dim, r, name);
}

class Sharder {
 public:
  Sharder(const ModelConfig& c, int rank, int ranks, std::map<std::string, Tensor>& params,
          std::map<std::string, Model::Impl::TpSlice>& slices, const std::set<std::string>& deferred)
      : rank_(rank), ranks_(ranks), params_(params), slices_(slices), deferred_(deferred), heads_(c.n_heads),
        kv_heads_(c.kv_heads()), head_dim_(c.dim_head()) {}

  void attention(const nn::Attention& a) {
    if (!a.o_proj.weight.defined()) return;  // no such attention in this layer
    const Ranges q = part(heads_, head_dim_), kv = part(kv_heads_, head_dim_);
    if (a.qkv_proj.weight.defined()) {  // fused [q; k; v] rows
      const std::int64_t qw = heads_ * head_dim_, kvw = kv_heads_ * head_dim_;
      Ranges all = q;
      for (const auto& [x, y] : kv) all.emplace_back(qw + x, qw + y);
      for (const auto& [x, y] : kv) all.emplace_back(qw + kvw + x, qw + kvw + y);
      outputs(a.qkv_proj, all);
    } else {
      outputs(a.q_proj, q);
      outputs(a.k_proj, kv);
      outputs(a.v_proj, kv);
    }
    inputs(a.o_proj, q);
  }

  void ffn(const nn::FeedForward& f) {
    const std::int64_t width = out_features(f.up);
    TFM_CHECK(width % ranks_ == 0, "tensor parallel", f.up.name, ": the FFN's ", width, " hidden units do not divide by ",
              ranks_, " ranks");
    const Ranges h = part(width, 1);
    outputs(f.up, h);
    if (f.gate.weight.defined()) outputs(f.gate, h);
    inputs(f.down, h);
  }

  // A (buckets, H) relative position bias table keeps this rank's heads.
  void head_columns(const Tensor& table) {
    if (!table.defined()) return;
    for (auto& [name, t] : params_)
      if (t.raw_data() == table.raw_data()) {
        take(name, 1, part(heads_, 1));
        return;
      }
    fail("tensor parallel", "the relative position bias is not a parameter of the model");
  }

  // The token embedding and a vocabulary head (tied: the same parameter, split once) keep rows
  // [first, last) of the vocabulary; a head's bias, (1, V) or (V), its entries.
  void vocabulary(const Layout& l, std::int64_t first, std::int64_t last) {
    const Ranges v = {{first, last}};
    std::set<const void*> done;
    for (const Tensor* t : {&l.tok_emb, &l.lm_head, &l.mlm_decoder, &l.logits_bias, &l.mlm_bias}) {
      if (!t->defined() || !done.insert(t->raw_data()).second) continue;
      std::vector<std::string> names;  // (a tied table may be held under two names: one slice for both)
      for (const auto& [name, p] : params_)
        if (p.raw_data() == t->raw_data()) names.push_back(name);
      TFM_CHECK(!names.empty(), "tensor parallel", "a vocabulary table ", t->str(), " is not a parameter of the model");
      take(names[0], t->dim() == 1 || t == &l.logits_bias ? t->dim() - 1 : 0, v);
      for (std::size_t i = 1; i < names.size(); ++i) {
        params_[names[i]] = params_[names[0]];
        slices_[names[i]] = slices_[names[0]];
      }
    }
  }
  // Whether every vocabulary table of the layout has `vocab` rows (bias: entries), so it splits.
  static bool vocabulary_splits(const Layout& l, std::int64_t vocab) {
    bool any = false;
    for (const Tensor* t : {&l.tok_emb, &l.lm_head, &l.mlm_decoder, &l.logits_bias, &l.mlm_bias}) {
      if (!t->defined()) continue;
      if (t->dim() > 2 || t->size(t == &l.logits_bias || t->dim() == 1 ? -1 : 0) != vocab) return false;
      any = true;
    }
    return any;
  }

 private:
  // This rank's share of n units of `width` elements each.
  Ranges part(std::int64_t n, std::int64_t width) const {
    const std::int64_t per = n / ranks_;
    return {{rank_ * per * width, (rank_ + 1) * per * width}};
  }
  // The dims of a Linear's stored weight: (out, in), or (in, out) for a Conv1D held as f32
  // (or still in its file's type, to become f32: Model::from_parameters_deferred).
  int out_dim(const nn::Linear& l) const {
    return l.in_out && (l.weight.dtype() == DType::f32 || deferred_.count(l.name + ".weight") > 0) ? 1 : 0;
  }
  std::int64_t out_features(const nn::Linear& l) const { return l.weight.size(out_dim(l)); }

  Tensor& param(const std::string& name) {
    auto it = params_.find(name);
    TFM_CHECK(it != params_.end(), "tensor parallel", "no parameter '", name, "'");
    return it->second;
  }
  void outputs(const nn::Linear& l, const Ranges& r) {
    take(l.name + ".weight", out_dim(l), r);
    if (l.bias.defined()) take(l.name + ".bias", 0, r);
  }
  void inputs(const nn::Linear& l, const Ranges& r) {  // the bias stays whole: added after the sum
    take(l.name + ".weight", 1 - out_dim(l), r);
  }
  // The slice takes the parameter's place; the pages of a mapped file it came from are let go
  // at once, so loading holds one matrix's pages at a time, not the whole file's.
  void take(const std::string& name, int dim, const Ranges& r) {
    Tensor& p = param(name);
    const Tensor old = p;
    slices_[name] = {dim, r, old.shape()};
    p = slice_tensor(old, dim, r, name);
    old.storage()->release_file_pages();
  }

  int rank_, ranks_;
  std::map<std::string, Tensor>& params_;
  std::map<std::string, Model::Impl::TpSlice>& slices_;
  const std::set<std::string>& deferred_;
  std::int64_t heads_, kv_heads_, head_dim_;
};

}  // namespace

void mark_tensor_parallel(Layout& l, int rank, int ranks, const nn::RankSum& sum) {
  for (Stack* s : {&l.encoder, &l.decoder, &l.retriever})
    for (Layer& L : s->layers) {
      for (nn::Attention* a : {&L.self_attn, &L.cross_attn, &L.cca}) {
        if (!a->o_proj.weight.defined()) continue;
        a->o_proj.partial_sum = sum;
        a->input_grad_sum = sum;
        a->head_offset = rank * a->n_heads;
        a->heads_total = ranks * a->n_heads;
      }
      L.ffn.down.partial_sum = sum;
      L.ffn.input_grad_sum = sum;
    }
}

void Model::shard_tensor_parallel(int rank, int ranks, PartialSum sum) {
  Impl& m = *impl_;
  TFM_CHECK(ranks >= 1 && rank >= 0 && rank < ranks, "tensor parallel", "rank ", rank, " of ", ranks, " ranks");
  TFM_CHECK(m.tp_ranks == 1, "tensor parallel", "the model is already rank ", m.tp_rank, "'s shard of ", m.tp_ranks);
  TFM_CHECK(!m.cfg.text_tower.enabled(), "tensor parallel", "a CLIP model's two towers are not split into shards");
  if (ranks == 1) return;
  TFM_CHECK(static_cast<bool>(sum), "tensor parallel", "no function to sum the partial products");
  TFM_CHECK(!m.lora && !m.bottleneck && !m.prefix, "tensor parallel", "merge or detach the ",
            m.lora ? "LoRA factors" : m.bottleneck ? "bottleneck adapters" : "prefix", " first (not sharded)");
  const ModelConfig& c = m.cfg;
  TFM_CHECK(c.n_heads % ranks == 0 && c.kv_heads() % ranks == 0, "tensor parallel", "the model's ", c.n_heads,
            " attention heads and ", c.kv_heads(), " key/value heads must divide by the ", ranks, " ranks");
  std::map<std::string, Tensor> params = m.params;
  std::map<std::string, Impl::TpSlice> slices;
  Sharder s(c, rank, ranks, params, slices, m.deferred);
  for (const Stack* st : {&m.layout.encoder, &m.layout.decoder, &m.layout.retriever}) {
    for (const Layer& L : st->layers) {
      s.attention(L.self_attn);
      s.attention(L.cross_attn);
      if (L.has_cca) s.attention(L.cca);
      s.ffn(L.ffn);
    }
    s.head_columns(st->relative_bias);
  }
  // The vocabulary too, when its tables have vocab_size rows (one that does not, stays whole).
  const bool split_vocab = c.vocab_size >= ranks && Sharder::vocabulary_splits(m.layout, c.vocab_size);
  const auto [vocab_first, vocab_last] = nn::vocab_part(c.vocab_size, rank, ranks);
  if (split_vocab) s.vocabulary(m.layout, vocab_first, vocab_last);
  // What stays whole is copied too (tied tensors once), so that no parameter views the loaded
  // files any more: their mapping, and every page the slicing touched, is released.
  std::map<const void*, Tensor> copies;
  for (auto& [name, t] : params) {
    if (t.raw_data() != m.params.at(name).raw_data()) continue;  // sliced: a copy already
    auto [it, fresh] = copies.try_emplace(t.raw_data());
    if (fresh) it->second = t.clone();
    const Tensor source = t;
    t = it->second;
    source.storage()->release_file_pages();
  }
  const ModelConfig local = tensor_parallel_config(c, ranks);
  if (m.alibi.defined()) m.alibi = slice_1d(m.alibi, {{rank * local.n_heads, (rank + 1) * local.n_heads}}, "alibi slopes");
  for (auto& [name, t] : params)  // an autograd record the modules' handles share (as a load gives)
    if (t.autograd_meta() == nullptr) t.requires_grad_(false);
  m.params = std::move(params);
  m.tp_slices = std::move(slices);
  m.tp_whole_cfg = c;
  m.cfg = local;
  m.tp_rank = rank;
  m.tp_ranks = ranks;
  m.tp_sum = std::make_shared<const PartialSum>(std::move(sum));
  if (split_vocab) m.tp_vocab = nn::VocabShard{vocab_first, vocab_last, c.vocab_size, rank, ranks, m.tp_sum};
  m.rewire();
}

ModelConfig tensor_parallel_config(const ModelConfig& c, int ranks) {
  ModelConfig local = c;
  local.head_dim = c.dim_head();
  local.n_heads = c.n_heads / ranks;
  local.n_kv_heads = c.kv_heads() / ranks;
  local.d_ff = c.d_ff / ranks;
  return local;
}

bool Model::tensor_parallel_split(const std::string& name) const { return impl_->tp_slices.count(name) > 0; }

Tensor Model::tensor_parallel_slice(const std::string& name, const Tensor& whole) const {
  const auto it = impl_->tp_slices.find(name);
  if (it == impl_->tp_slices.end()) return whole;
  TFM_CHECK(whole.shape() == it->second.whole, "tensor parallel", name, ": ", whole.str(), " is not shaped as the whole ",
            "parameter ", shape_str(it->second.whole));
  return slice_tensor(whole, it->second.dim, it->second.ranges, name);
}

Tensor Model::tensor_parallel_gather(const std::string& name, const Tensor& slice) const {
  const auto it = impl_->tp_slices.find(name);
  if (it == impl_->tp_slices.end()) return slice;
  const Impl::TpSlice& p = it->second;
  TFM_CHECK(slice.dtype() == DType::f32, "tensor parallel", name, ": gathering a ", dtype_name(slice.dtype()),
            " slice (f32 only)");
  // Each rank writes its slice into zeros of the whole shape; the sum over the ranks is the
  // whole tensor (adding zeros is exact, so every rank gets the same bits).
  Tensor whole = Tensor::zeros(p.whole);
  const Tensor src = slice.is_contiguous() ? slice : slice.clone();
  const std::int64_t rows = p.whole.size() == 1 ? 1 : p.whole[0], cols = p.whole.size() == 1 ? p.whole[0] : p.whole[1];
  const int dim = p.whole.size() == 1 ? 1 : p.dim;
  const float* s = src.data<float>();
  float* d = whole.data<float>();
  if (dim == 0) {
    for (const auto& [a, b] : p.ranges) {
      std::memcpy(d + a * cols, s, static_cast<std::size_t>((b - a) * cols) * sizeof(float));
      s += (b - a) * cols;
    }
  } else {
    for (std::int64_t r = 0; r < rows; ++r)
      for (const auto& [a, b] : p.ranges) {
        std::memcpy(d + r * cols + a, s, static_cast<std::size_t>(b - a) * sizeof(float));
        s += b - a;
      }
  }
  (*impl_->tp_sum)(whole);
  return whole;
}

Model Model::tensor_parallel_whole() const {
  TFM_CHECK(impl_->tp_ranks > 1, "tensor parallel", "the model is not a shard");
  std::map<std::string, Tensor> whole;
  for (const auto& [name, t] : impl_->params) whole[name] = tensor_parallel_gather(name, t);
  return Model::from_parameters(impl_->tp_whole_cfg, std::move(whole));
}

const ModelConfig& Model::tensor_parallel_whole_config() const {
  TFM_CHECK(impl_->tp_ranks > 1, "tensor parallel", "the model is not a shard");
  return impl_->tp_whole_cfg;
}

std::pair<std::int64_t, std::int64_t> Model::vocab_shard() const {
  const nn::VocabShard& v = impl_->tp_vocab;
  return v.ranks > 1 ? std::pair{v.first, v.last} : std::pair<std::int64_t, std::int64_t>{0, impl_->cfg.vocab_size};
}

Tensor Model::logits_cross_entropy(const Tensor& logits, const Tensor& targets, float label_smoothing) const {
  const nn::VocabShard& v = impl_->tp_vocab;
  TFM_CHECK(logits.defined() && logits.dim() >= 1, "cross_entropy", "no logits");
  const Tensor rows = reshape(logits, {-1, logits.size(-1)}), t = reshape(targets, {-1});
  if (v.ranks > 1 && logits.size(-1) == v.last - v.first) return nn::vocab_parallel_cross_entropy(rows, t, v, -100, label_smoothing);
  return cross_entropy(rows, t, -100, label_smoothing);
}

int Model::tensor_parallel_rank() const { return impl_->tp_rank; }
int Model::tensor_parallel_ranks() const { return impl_->tp_ranks; }

}  // namespace tfm
