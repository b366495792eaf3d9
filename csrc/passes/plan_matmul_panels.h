#pragma once
#include "ir/program.h"
#include "passes/pass.h"

namespace pypto {
/// "plan_matmul_panels": lays out the b operands of float matmuls in column panels. See
/// plan_matmul_panels.cc.
BlockGraph PlanMatmulPanels(const BlockGraph& g, const PassOptions& opts);
/// Fewest rows of a (the tile's m) for which a product's b is loaded in panels.
constexpr int64_t kPanelMinRows = 16;
/// Fewest panels of b (its columns over the width) for which it is.
constexpr int64_t kPanelMinPanels = 3;
}  // namespace pypto
