/// C++ for one InCore function: a static kernel `k_<name>(regions, scalars)` over the tile
/// templates of tile_ops.h, with fused elementwise chains, view loads and streaming stores.
#pragma once

#include <string>
#include <vector>

#include "ir/bounds.h"
#include "ir/program.h"

namespace pypto::codegen {

/// The kernel of `f`; `bounds` (access_bounds of `f`) says which accesses it checks itself.
std::string emit_kernel(const InCoreFunction& f, const std::vector<MemRef>& memrefs, const FunctionBounds& bounds);

}  // namespace pypto::codegen
