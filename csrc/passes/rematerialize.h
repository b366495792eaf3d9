#pragma once
#include "ir/program.h"
#include "passes/pass.h"

namespace pypto {
/// "rematerialize": recomputes over-budget local buffers instead of keeping them. See rematerialize.cc.
BlockGraph Rematerialize(const BlockGraph& g, const PassOptions& opts);
}  // namespace pypto
