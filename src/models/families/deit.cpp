// DeiT (Touvron et al. 2021; Hugging Face's DeiTModel, DeiTForImageClassification and
// DeiTForImageClassificationWithTeacher): ViT's encoder (shared from vit.cpp under "deit.")
// with a second learned token after [CLS], the distillation token, and positions for both.
// The model "with teacher" has two heads, the classifier on [CLS] and the distillation
// classifier on the distillation token; its logits are their mean. Trained with a teacher
// (`distill` in the training config), the distillation head learns the teacher's labels and
// the [CLS] head the true ones (docs/vision.md).
#include <algorithm>

#include "models/families/families.h"
#include "tfm/error.h"

namespace tfm {
namespace {

using json = nlohmann::json;

// "architectures" picks the head and whether the distillation head exists; written back so
// a trained model's config.json says which of the three it is.
ConfigKey deit_architectures_key() {
  static const std::vector<std::string> names{"DeiTForImageClassificationWithTeacher", "DeiTForImageClassification",
                                              "DeiTModel"};
  return {"architectures",
          [](ModelConfig& c, const json& v, const std::string& w) {
            TFM_CHECK(v.is_array(), w, "key 'architectures' must be an array");
            for (const auto& a : v) {
              const std::string name = read_string(a, "architectures", w);
              TFM_CHECK(std::find(names.begin(), names.end(), name) != names.end(), w,
                        "key 'architectures': unsupported value '", name, "' (allowed: ", names[0], ", ", names[1], ", ",
                        names[2], ")");
              c.head = name == names[2] ? HeadKind::none : HeadKind::classifier;
              c.distillation_head = name == names[0];
            }
          },
          [](const ModelConfig& c) {
            return json::array({c.head == HeadKind::none ? names[2] : c.distillation_head ? names[0] : names[1]});
          }};
}

ConfigSchema schema() {
  ConfigSchema s = vit_like_schema("deit");
  s.base.distillation_token = true;
  s.base.distillation_head = true;  // DeiTConfig's published checkpoints are the distilled ones
  s.keys.insert(s.keys.begin(), deit_architectures_key());
  s.finish = [](ModelConfig& c, const json& file, const std::string& w) {
    TFM_CHECK(c.cls_token, w, "DeiT reads its [CLS] token: use_cls_token must stay true");
    TFM_CHECK(!c.distillation_head || c.head == HeadKind::classifier, w,
              "the distillation head is a classifier's (architectures DeiTForImageClassificationWithTeacher)");
    TFM_CHECK(!c.distillation_head || c.pooling == Pooling::first, w,
              "the two DeiT heads read their own tokens: \"pooling\" must stay \"first\"");
    finish_image_config(c, file, w);
  };
  return s;
}

std::vector<ParamSpec> parameters(const ModelConfig& c) {
  std::vector<ParamSpec> s = vit_encoder_specs(c, "deit.");
  if (c.head != HeadKind::classifier) return s;
  if (c.distillation_head) {
    add_linear_spec(s, "cls_classifier", c.num_labels, c.d_model, true);
    add_linear_spec(s, "distillation_classifier", c.num_labels, c.d_model, true);
  } else {
    add_linear_spec(s, "classifier", c.num_labels, c.d_model, true);
  }
  return s;
}

void wire(Layout& l, const ModelConfig& c, const WireParams& P) {
  wire_vit_encoder(l, c, P, "deit.");
  if (c.head != HeadKind::classifier) return;
  if (c.distillation_head) {
    l.classifier = P.linear("cls_classifier");
    l.dist_classifier = P.linear("distillation_classifier");
  } else {
    l.classifier = P.linear("classifier");
  }
}

// DeiTModel's pooler (add_pooling_layer), which no head here reads.
bool hub_drops(const ModelConfig&, const std::string& n) { return starts_with(n, "deit.pooler."); }

}  // namespace

Family deit_family() {
  Family f;
  f.model_type = "deit";
  f.schema = schema();
  ModelConfig b16 = f.schema.base;  // DeiT-B/16 distilled, ImageNet-1k's classes
  b16.num_labels = 1000;
  b16.max_positions = b16.image_tokens();
  f.presets = {{"deit-b16-distilled", b16}};
  f.parameters = parameters;
  f.wire = wire;
  f.hub_prefix = "deit.";
  f.hub_drops = hub_drops;
  return f;
}

}  // namespace tfm
