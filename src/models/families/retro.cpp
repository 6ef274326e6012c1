// RETRO (Borgeaud et al. 2022), model_type "retro": the engine's decoder-only family with a
// "retrieval" block. Its parameters are the "transformer" family's under the same names, plus
//   decoder.layers.<i>.cca_norm.*, decoder.layers.<i>.cca.{q,k,v,o}_proj.*   (i in retrieval.layers)
//   retriever.layers.<j>.* and retriever.norm.*   the neighbours' encoder, shaped like the decoder
// The neighbours' encoder reads the shared token embedding and positions. What chunked
// cross-attention computes is in model.cpp (chunked_cross_attention); docs/retrieval.md.
#include "models/families/families.h"

namespace tfm {
namespace {

constexpr std::array<const char*, 4> kNames{"q_proj", "k_proj", "v_proj", "o_proj"};

std::vector<ParamSpec> parameters(const Family& base, const ModelConfig& c) {
  std::vector<ParamSpec> s = base.parameters(c);
  if (!c.retrieval.enabled()) return s;  // --no-retrieval: the plain decoder
  for (std::int64_t i : c.retrieval.layers) {
    const std::string p = layer_prefix("decoder.layers", i);
    add_norm_spec(s, p + "cca_norm", c);
    engine_attention_specs(s, p + "cca.", c);
  }
  engine_stack_specs(s, "retriever", c.retrieval.encoder_layers, false, c);
  return s;
}

void wire(const Family& base, Layout& l, const ModelConfig& c, const WireParams& P) {
  base.wire(l, c, P);
  if (!c.retrieval.enabled()) return;
  for (std::int64_t i : c.retrieval.layers) {
    Layer& L = l.decoder.layers.at(static_cast<std::size_t>(i));
    L.has_cca = true;
    L.cca_norm = P.norm(L.name + "cca_norm", c);
    L.cca = wire_attention(P, c, L.name + "cca.", kNames);
  }
  wire_engine_stack(l.retriever, "retriever", c.retrieval.encoder_layers, false, c, P);
}

}  // namespace

Family retro_family() {
  const Family base = transformer_family();
  Family f = base;
  f.model_type = "retro";
  f.presets.clear();
  f.schema.base.model_type = "retro";
  f.schema.keys.push_back(retrieval_key());
  f.parameters = [base](const ModelConfig& c) { return parameters(base, c); };
  f.wire = [base](Layout& l, const ModelConfig& c, const WireParams& P) { wire(base, l, c, P); };
  return f;
}

}  // namespace tfm
