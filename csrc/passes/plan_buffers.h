#pragma once
#include "ir/program.h"
#include "passes/pass.h"

namespace pypto {
/// "plan_buffers": computes each InCore function's tile-buffer bytes. See plan_buffers.cc.
BlockGraph PlanBuffers(const BlockGraph& g, const PassOptions& opts);
/// The arena bytes PlanBuffers gives `f` (with buffer reuse, or without): the one measure the
/// buffer budget (buffer_budget_bytes) is held against.
int64_t planned_arena_bytes(const InCoreFunction& f, const std::vector<MemRef>& memrefs, bool reuse);
}  // namespace pypto
