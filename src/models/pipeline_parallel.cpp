// Pipeline parallelism for inference (Model::shard_pipeline, tfm/model.h): a decoder-only model
// becomes one stage, a contiguous run of its layers; an encoder-decoder one run of the encoder's
// layers and one of the decoder's. The stage keeps those layers' parameters under the names of
// a model of that many layers (the family wires them as usual), so its KV cache holds its
// layers only; decode_cached (model_cached.cpp) and encode (model.cpp) hand the hidden states on.
#include <algorithm>
#include <regex>
#include <set>

#include "models/model_impl.h"
#include "tfm/error.h"

namespace tfm {

namespace {
void check_bounds(const PipelineBounds& b, std::int64_t layers, int stages) {
  bool ok = static_cast<int>(b.size()) == stages + 1 && b.front() == 0 && b.back() == layers;
  for (std::size_t i = 1; ok && i < b.size(); ++i) ok = b[i] > b[i - 1];
  TFM_CHECK(ok, "pipeline parallel", "stage bounds must rise from 0 to the ", layers, " layers in ", stages + 1,
            " steps of at least one layer (", b.size(), " given)");
}
}  // namespace

std::pair<std::int64_t, std::int64_t> pipeline_layers(std::int64_t layers, int stage, int stages,
                                                      const PipelineBounds& bounds) {
  if (!bounds.empty()) {
    check_bounds(bounds, layers, stages);
    return {bounds[static_cast<std::size_t>(stage)], bounds[static_cast<std::size_t>(stage) + 1]};
  }
  // The first layers % stages stages take one layer more.
  const std::int64_t base = layers / stages, extra = layers % stages;
  const std::int64_t first = stage * base + std::min<std::int64_t>(stage, extra);
  return {first, first + base + (stage < extra ? 1 : 0)};
}

PipelineBounds stack_bounds(const PipelineBounds& bounds, int stages, bool decoder_of_encoder_decoder) {
  if (bounds.empty()) return bounds;
  const auto n = static_cast<std::size_t>(stages) + 1;
  TFM_CHECK(bounds.size() == 2 * n, "pipeline parallel", "an encoder-decoder's stage bounds are ", 2 * n,
            " entries (the encoder's ", n, ", then the decoder's), not ", bounds.size());
  const auto from = bounds.begin() + static_cast<std::ptrdiff_t>(decoder_of_encoder_decoder ? n : 0);
  return PipelineBounds(from, from + static_cast<std::ptrdiff_t>(n));
}

ModelConfig pipeline_config(const ModelConfig& c, int stage, int stages, const PipelineBounds& bounds) {
  ModelConfig local = c;
  if (c.architecture != Architecture::encoder_decoder) {
    const auto [first, last] = pipeline_layers(c.n_layers, stage, stages, bounds);
    local.n_layers = last - first;
    return local;
  }
  const auto [first, last] = pipeline_layers(c.n_layers, stage, stages, stack_bounds(bounds, stages, false));
  local.n_layers = last - first;
  const auto [dec_first, dec_last] = pipeline_layers(c.decoder_layers(), stage, stages, stack_bounds(bounds, stages, true));
  local.n_decoder_layers = dec_last - dec_first;
  return local;
}

void Model::shard_pipeline(int stage, int stages, PipeComm comm, const PipelineBounds& bounds) {
  Impl& m = *impl_;
  const ModelConfig& c = m.cfg;
  TFM_CHECK(stages >= 1 && stage >= 0 && stage < stages, "pipeline parallel", "stage ", stage, " of ", stages, " stages");
  TFM_CHECK(m.pp_stages == 1, "pipeline parallel", "the model is already stage ", m.pp_stage, " of ", m.pp_stages);
  if (stages == 1) return;
  const bool seq2seq = c.architecture == Architecture::encoder_decoder, encoder_only = c.architecture == Architecture::encoder_only;
  TFM_CHECK((c.architecture == Architecture::decoder_only && c.head == HeadKind::lm) || seq2seq || encoder_only,
            "pipeline parallel", "splits language models, encoder-decoders and encoders (this one is a ",
            to_string(c.architecture), " model with a ", to_string(c.head), " head)");
  TFM_CHECK(!c.text_tower.enabled(), "pipeline parallel", "a CLIP model's two towers are not split into stages");
  TFM_CHECK(!c.retrieval.enabled(), "pipeline parallel", "RETRO's retriever stack is not split");
  TFM_CHECK(!m.lora && !m.bottleneck && !m.prefix, "pipeline parallel", "merge or detach the ",
            m.lora ? "LoRA factors" : m.bottleneck ? "bottleneck adapters" : "prefix", " first (not split)");
  TFM_CHECK(m.tp_ranks == 1, "pipeline parallel", "a tensor-parallel shard is not split into stages as well");
  TFM_CHECK(c.n_layers >= stages && (!seq2seq || c.decoder_layers() >= stages), "pipeline parallel", "the model's ",
            seq2seq ? std::to_string(c.n_layers) + " encoder and " + std::to_string(c.decoder_layers()) + " decoder"
                    : std::to_string(c.n_layers),
            " layers cannot make ", stages, " stages (each needs one", seq2seq ? " of each)" : ")");
  TFM_CHECK(comm.send && comm.recv && comm.broadcast, "pipeline parallel", "no functions to hand the activations on");
  const auto [first, last] =
      pipeline_layers(c.decoder_layers(), stage, stages, seq2seq ? stack_bounds(bounds, stages, true) : bounds);
  const auto [enc_first, enc_last] =
      pipeline_layers(c.n_layers, stage, stages, seq2seq ? stack_bounds(bounds, stages, false) : encoder_only ? bounds : PipelineBounds());
  // Layer i's parameters are those under its prefix ("model.layers.7."): this stage keeps
  // layers [first, last) renamed to [0, last - first), and everything outside the layers.
  static const std::regex trailing_index(R"((\d+)\.$)");
  std::map<std::string, Tensor> kept;
  std::vector<std::pair<std::string, std::string>> renames;  // this stage's layer prefixes: global, local
  std::vector<std::string> dropped;
  const auto split_stack = [&](const std::vector<Layer>& layers, std::int64_t from, std::int64_t to) {
    for (std::size_t i = 0; i < layers.size(); ++i) {
      std::smatch hit;
      TFM_CHECK(std::regex_search(layers[i].name, hit, trailing_index), "pipeline parallel", "layer prefix '",
                layers[i].name, "' does not end in its index");
      const auto li = static_cast<std::int64_t>(i);
      if (li >= from && li < to)
        renames.emplace_back(layers[i].name, hit.prefix().str() + std::to_string(li - from) + ".");
      else
        dropped.push_back(layers[i].name);
    }
  };
  split_stack(m.layout.decoder.layers, first, last);
  if (seq2seq || encoder_only) split_stack(m.layout.encoder.layers, enc_first, enc_last);
  // A stack-wide table that a family stores in its first layer (T5's relative position bias,
  // in block 0) is every stage's, under its name (each stage's layer 0 reads it there).
  std::set<const void*> stack_wide;
  for (const Stack* st : {&m.layout.encoder, &m.layout.decoder})
    if (st->relative_bias.defined()) stack_wide.insert(st->relative_bias.raw_data());
  const auto starts = [](const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; };
  std::map<const void*, Tensor> copies;  // (as in tensor_parallel.cpp: release the mapped files)
  std::map<std::string, std::string> globals;
  std::set<std::string> shared, deferred;
  for (const auto& [name, t] : m.params) {
    std::string local = name;
    const bool everywhere = stack_wide.count(t.raw_data()) > 0;
    bool other_stage = false;
    for (const auto& p : dropped) other_stage = other_stage || starts(name, p);
    if (other_stage && !everywhere) continue;
    bool in_layer = false;
    for (const auto& [global, to] : renames)
      if (!everywhere && starts(name, global)) {
        local = to + name.substr(global.size());
        in_layer = true;
      }
    if (!in_layer) shared.insert(local);
    auto [it, fresh] = copies.try_emplace(t.raw_data());
    if (fresh) it->second = t.clone();
    if (it->second.autograd_meta() == nullptr) it->second.requires_grad_(false);  // shared by the modules' handles
    kept.emplace(local, it->second);
    if (m.deferred.count(name) > 0) deferred.insert(local);
    globals[local] = name;
    t.storage()->release_file_pages();
  }
  m.params = std::move(kept);
  m.deferred = std::move(deferred);
  m.pp_global_names = std::move(globals);
  m.pp_shared = std::move(shared);
  m.pp_whole_cfg = c;
  m.cfg = pipeline_config(c, stage, stages, bounds);
  m.pp_stage = stage;
  m.pp_stages = stages;
  m.pp_first = first;
  m.pp_enc_first = enc_first;
  m.pp = std::make_shared<const PipeComm>(std::move(comm));
  m.rewire();
}

std::string Model::pipeline_global_name(const std::string& local) const {
  if (impl_->pp_stages == 1) return local;
  const auto it = impl_->pp_global_names.find(local);
  TFM_CHECK(it != impl_->pp_global_names.end(), "pipeline parallel", "no parameter '", local, "' on this stage");
  return it->second;
}

bool Model::pipeline_shared(const std::string& local) const {
  return impl_->pp_stages == 1 || impl_->pp_shared.count(local) > 0;
}

const ModelConfig& Model::pipeline_whole_config() const {
  return impl_->pp_stages == 1 ? impl_->cfg : impl_->pp_whole_cfg;
}

int Model::pipeline_stage() const { return impl_->pp_stage; }
int Model::pipeline_stages() const { return impl_->pp_stages; }

}  // namespace tfm
