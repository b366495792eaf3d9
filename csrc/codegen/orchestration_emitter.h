/// C++ for the orchestration: the exported entry `pypto_orchestrate` that checks the caller's
/// tensors, builds views and workspaces, checks each CALL's regions and access bounds and submits
/// one task per CALL through the runtime's C ABI (runtime/pypto_abi.h).
#pragma once

#include <string>
#include <vector>

#include "ir/bounds.h"
#include "ir/program.h"

namespace pypto::codegen {

/// The orchestration of `g`; `bounds` holds access_bounds of each of g's functions, in order.
std::string emit_orchestration(const ExecutionGraph& g, const std::vector<FunctionBounds>& bounds);

}  // namespace pypto::codegen
