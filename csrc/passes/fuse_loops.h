#pragma once
#include "ir/program.h"
#include "passes/pass.h"

namespace pypto {
/// "fuse_loops": merges adjacent compatible loops inside InCore functions. See fuse_loops.cc.
BlockGraph FuseLoops(const BlockGraph& g, const PassOptions& opts);
}  // namespace pypto
