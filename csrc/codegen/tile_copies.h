// The generic tile copies compiled into pypto per tile-library variant (codegen/tile_ops/copies.cc),
// and which of them a target's kernels call.
#pragma once

#include <string>
#include <vector>

#include "ir/target.h"
#include "runtime/pypto_abi.h"

namespace pypto::codegen {

/// The copies for kernels of `target`, or nullptr when this build of pypto has none that code for
/// `target` may call (another architecture, or a compiler that could not build that variant):
/// such kernels compile their copies inline.
const pypto_tile_copies* tile_copies_for(const Target& target);

/// The variants this build holds, by name ("generic", "sse", "avx2", "avx512").
std::vector<std::string> tile_copies_variants();

}  // namespace pypto::codegen
