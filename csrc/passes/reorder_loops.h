#pragma once
#include "ir/program.h"
#include "passes/pass.h"

namespace pypto {
/// "reorder_loops": interchanges and strip-mines producers' grid loops so they
/// can fuse with their consumers. See reorder_loops.cc.
TileGraph ReorderLoops(const TileGraph& g, const PassOptions& opts);
}  // namespace pypto
