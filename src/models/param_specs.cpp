// Every parameter's checkpoint name and shape, as the model's family declares them.
#include "models/family.h"

namespace tfm {

std::vector<ParamSpec> parameter_specs(const ModelConfig& c) { return model_family(c.model_type).parameters(c); }

}  // namespace tfm
