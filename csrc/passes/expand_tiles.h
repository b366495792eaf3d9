#pragma once
#include "ir/program.h"
#include "ir/tensor_graph.h"
#include "passes/pass.h"

namespace pypto {
/// "expand_tiles": Tensor Graph -> Tile Graph. See expand_tiles.cc.
TileGraph ExpandTiles(const TensorGraph& g, const PassOptions& opts);
}  // namespace pypto
