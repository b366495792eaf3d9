#pragma once
#include "ir/tensor_graph.h"
#include "passes/pass.h"

namespace pypto {
/// "retile_epilogues": gives the elementwise ops over a matmul's output (its epilogue) the matmul's
/// output tile, so that expand_tiles gives them its grid and fuse_blocks can fuse them with it.
/// See retile_epilogues.cc.
TensorGraph RetileEpilogues(const TensorGraph& g, const PassOptions& opts);
}  // namespace pypto
