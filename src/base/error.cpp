// tfm::Error: formats "[where] what" once, at construction.
#include "tfm/error.h"

namespace tfm {

Error::Error(std::string where, std::string what)
    : std::runtime_error("[" + where + "] " + what), where_(std::move(where)) {}

}  // namespace tfm
