#pragma once
#include "ir/program.h"
#include "passes/pass.h"

namespace pypto {
/// "plan_matmul_panels": lays out the b operands of float matmuls in column panels. See
/// plan_matmul_panels.cc.
BlockGraph PlanMatmulPanels(const BlockGraph& g, const PassOptions& opts);
/// Fewest rows of a (the tile's m) for which a product's b is loaded in panels: where its load
/// copies anyway, and where the load might view b in place instead.
constexpr int64_t kPanelMinRows = 16;
constexpr int64_t kPanelMinRowsInPlace = 128;
/// Fewest columns of a b the load might view in place for which it is loaded in panels.
constexpr int64_t kPanelMinColsInPlace = 128;
/// Fewest panels of b (its columns over the width) for which it is.
constexpr int64_t kPanelMinPanels = 3;
}  // namespace pypto
