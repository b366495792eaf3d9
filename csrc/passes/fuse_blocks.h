#pragma once
#include "ir/program.h"
#include "passes/pass.h"

namespace pypto {
/// "fuse_blocks": Tile Graph -> Block Graph. See fuse_blocks.cc.
BlockGraph FuseBlocks(const TileGraph& g, const PassOptions& opts);
}  // namespace pypto
