// Wiring a model's modules: its family's wire function, then what every family shares
// (layer indices, bottleneck adapters).
#include "models/layout.h"

#include "models/family.h"

namespace tfm {

Layout wire_layout(const ModelConfig& c, const std::map<std::string, Tensor>& params, const LoraWiring& lora) {
  std::map<std::string, bool> linears;
  const WireParams P(params, lora, &linears);
  Layout l;
  model_family(c.model_type).wire(l, c, P);
  for (Stack* s : {&l.encoder, &l.decoder, &l.retriever})
    for (std::size_t i = 0; i < s->layers.size(); ++i) {
      Layer& L = s->layers[i];
      L.self_attn.layer = L.cross_attn.layer = L.cca.layer = static_cast<std::int64_t>(i);
      L.attn_adapter = P.bottleneck(L.name + "attention_adapter");
      L.ffn_adapter = P.bottleneck(L.name + "output_adapter");
    }
  l.linear_modules = std::move(linears);
  return l;
}

}  // namespace tfm
