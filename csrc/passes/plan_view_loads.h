#pragma once
#include "ir/program.h"
#include "passes/pass.h"

namespace pypto {
/// "plan_view_loads": marks the loads whose tile may view its source. See plan_view_loads.cc.
BlockGraph PlanViewLoads(const BlockGraph& g, const PassOptions& opts);
}  // namespace pypto
