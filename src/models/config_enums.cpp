// Names of the ModelConfig enums, as config.json spells them.
#include "models/config_enums.h"

#include "tfm/error.h"

namespace tfm {

#define TFM_ENUM_NAMES(Type, ...)                                              \
  const std::vector<std::pair<Type, const char*>>& enum_names(Type) {          \
    static const std::vector<std::pair<Type, const char*>> names{__VA_ARGS__}; \
    return names;                                                              \
  }                                                                            \
  const char* to_string(Type v) {                                              \
    for (const auto& [e, n] : enum_names(Type{}))                              \
      if (e == v) return n;                                                    \
    return "?";                                                                \
  }

TFM_ENUM_NAMES(Architecture, {Architecture::encoder_only, "encoder_only"},
               {Architecture::decoder_only, "decoder_only"}, {Architecture::encoder_decoder, "encoder_decoder"})
TFM_ENUM_NAMES(NormKind, {NormKind::layer_norm, "layer_norm"}, {NormKind::rms_norm, "rms_norm"},
               {NormKind::scale_norm, "scale_norm"})
TFM_ENUM_NAMES(NormPlacement, {NormPlacement::post, "post"}, {NormPlacement::pre, "pre"})
TFM_ENUM_NAMES(FfnActivation, {FfnActivation::relu, "relu"}, {FfnActivation::gelu, "gelu"},
               {FfnActivation::gelu_tanh, "gelu_tanh"}, {FfnActivation::quick_gelu, "quick_gelu"}, {FfnActivation::silu, "silu"},
               {FfnActivation::swiglu, "swiglu"}, {FfnActivation::geglu, "geglu"}, {FfnActivation::reglu, "reglu"})
TFM_ENUM_NAMES(PositionKind, {PositionKind::none, "none"}, {PositionKind::sinusoidal, "sinusoidal"},
               {PositionKind::learned, "learned"}, {PositionKind::rope, "rope"}, {PositionKind::alibi, "alibi"},
               {PositionKind::t5_relative, "t5_relative"}, {PositionKind::sincos_2d, "sincos_2d"})
TFM_ENUM_NAMES(RopePairing, {RopePairing::halves, "halves"}, {RopePairing::adjacent, "adjacent"})
TFM_ENUM_NAMES(HeadKind, {HeadKind::none, "none"}, {HeadKind::lm, "lm"}, {HeadKind::classifier, "classifier"},
               {HeadKind::masked_lm, "masked_lm"})
TFM_ENUM_NAMES(Pooling, {Pooling::first, "first"}, {Pooling::mean, "mean"})

#undef TFM_ENUM_NAMES

}  // namespace tfm
