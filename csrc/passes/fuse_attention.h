#pragma once
#include "ir/tensor_graph.h"
#include "passes/pass.h"

namespace pypto {
/// "fuse_attention": replaces matmul -> (scale) -> softmax -> matmul chains of the Tensor Graph by
/// one attention op, which expand_tiles tiles as an online softmax over key blocks. See fuse_attention.cc.
TensorGraph FuseAttention(const TensorGraph& g, const PassOptions& opts);
}  // namespace pypto
