#pragma once
#include "ir/program.h"
#include "passes/pass.h"

namespace pypto {
/// "binary_expand": expands orchestration loops that carry a LoopRange into
/// power-of-two blocks plus a residual loop. See binary_expand.cc.
ExecutionGraph BinaryExpand(const ExecutionGraph& g, const PassOptions& opts);
}  // namespace pypto
