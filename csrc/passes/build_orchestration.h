#pragma once
#include "ir/program.h"
#include "passes/pass.h"

namespace pypto {
/// "build_orchestration": Block Graph -> Execution Graph. See build_orchestration.cc.
ExecutionGraph BuildOrchestration(const BlockGraph& g, const PassOptions& opts);
}  // namespace pypto
