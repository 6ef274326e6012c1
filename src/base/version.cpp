// The version string baked in at build time.
#include "tfm/runtime.h"

namespace tfm {
const char* version_string() { return TFM_VERSION " (git " TFM_GIT_HASH ")"; }
}  // namespace tfm
