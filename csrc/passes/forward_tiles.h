#pragma once
#include "ir/program.h"
#include "passes/pass.h"

namespace pypto {
/// "forward_tiles": store-to-load forwarding and dead local elimination. See forward_tiles.cc.
BlockGraph ForwardTiles(const BlockGraph& g, const PassOptions& opts);
}  // namespace pypto
