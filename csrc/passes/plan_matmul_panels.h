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
/// The largest first-level data cache on which the pass lays b out in panels unless told to
/// (PassOptions::matmul_panels): measured, panels paid on a 32 KiB L1d (AMD Zen 3, up to 1.15x) and
/// cost 1-12% on a 48 KiB one (AMD Zen 5, AVX2 and AVX-512 code alike).
constexpr int64_t kPanelMaxL1dBytes = 32 << 10;
/// Fewest panels of b (its columns over the width) for which it is.
constexpr int64_t kPanelMinPanels = 3;
}  // namespace pypto
