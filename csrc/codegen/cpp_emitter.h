/// C++ source for an Execution Graph: one kernel per InCore function and the
/// orchestration entry point `pypto_orchestrate` (see runtime/pypto_abi.h).
#pragma once

#include <string>

#include "ir/program.h"
#include "ir/target.h"

namespace pypto::codegen {

/// What every source for `target` starts with after its first line: the target's defines (which
/// select the tile library's variant: PTO_ISA and PTO_VECTOR_BYTES), the ABI header and the tile
/// library. The toolchain compiles it once per target as a precompiled header.
std::string emit_prelude(const Target& target);
/// The whole self-contained source file of a program: a first line, `prelude` (emit_prelude's)
/// and the kernels and orchestration. With `empty_kernels`, every kernel returns at once
/// (runtime benchmarks).
std::string emit_cpp(const ExecutionGraph& g, const std::string& prelude, bool empty_kernels = false);
/// Name of the orchestration symbol every generated library exports.
inline constexpr const char* kEntrySymbol = "pypto_orchestrate";
/// Name of the symbol that returns the message of a failed region check or zero divisor
/// (the orchestration returned PYPTO_STATUS_REGION or PYPTO_STATUS_ZERO).
inline constexpr const char* kErrorSymbol = "pypto_error_message";
/// `int32_t pypto_take_kernel_error(char* out, int32_t cap)`: copies why a kernel returned
/// PYPTO_STATUS_ACCESS, _ZERO or _INDEX (the first such kernel since the last call) into `out`,
/// clears it and returns that status; 0 when no kernel recorded a message.
inline constexpr const char* kKernelErrorSymbol = "pypto_take_kernel_error";
/// Name of the ABI-version symbol every generated library exports.
inline constexpr const char* kAbiSymbol = "pypto_abi_version";
/// The function a library built with out-of-line tile copies binds them with (pypto_abi.h).
inline constexpr const char* kBindCopiesSymbol = "pypto_bind_tile_copies";
/// Text of csrc/runtime/pypto_abi.h and csrc/codegen/tile_ops.h (embedded at build time).
extern const char* const kAbiHeaderText;
extern const char* const kTileOpsHeaderText;

}  // namespace pypto::codegen
