#pragma once
#include "ir/program.h"
#include "passes/pass.h"

namespace pypto {
/// "flatten_loops": replaces loops of one iteration inside InCore functions by their bodies. See flatten_loops.cc.
BlockGraph FlattenLoops(const BlockGraph& g, const PassOptions& opts);
}  // namespace pypto
