#pragma once
#include "ir/program.h"
#include "passes/pass.h"

namespace pypto {
/// "fuse_chains": runs of elementwise instructions as strip-mined loops. See fuse_chains.cc.
BlockGraph FuseChains(const BlockGraph& g, const PassOptions& opts);
/// Elements per strip of a fused run on `t` (a power of two; strip arrays stay in L1).
int64_t strip_elems(const Target& t);
}  // namespace pypto
