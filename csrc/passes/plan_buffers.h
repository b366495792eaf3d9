#pragma once
#include "ir/program.h"
#include "passes/pass.h"

namespace pypto {
/// "plan_buffers": computes each InCore function's tile-buffer bytes. See plan_buffers.cc.
BlockGraph PlanBuffers(const BlockGraph& g, const PassOptions& opts);
}  // namespace pypto
