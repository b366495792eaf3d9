/// A compiled program: every IR level, the generated texts and the loaded
/// library. This is the one codegen file that drives the pass pipeline.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <vector>

#include "codegen/toolchain.h"
#include "passes/pipeline.h"
#include "runtime/pypto_abi.h"

namespace pypto::codegen {

struct CompiledProgram {
  PipelineResult ir;
  std::string pto;
  std::string cpp;
  BuildResult build;
  pypto_orchestration_fn entry = nullptr;
  const char* (*error_message)() = nullptr;  ///< why the orchestration returned PYPTO_STATUS_REGION
  /// Takes why a kernel returned PYPTO_STATUS_ACCESS, _ZERO or _INDEX and returns that status (0: no
  /// message; see kKernelErrorSymbol).
  int32_t (*take_kernel_error)(char* out, int32_t cap) = nullptr;
  /// Entry tensors (parameters, in order) that some task writes, directly or through a view.
  std::vector<bool> written;
  /// Pairs (written tensor w, other tensor j) that may be the same array: every CALL reading j
  /// writes w at exactly the region it reads (elementwise in-place use).
  std::vector<std::pair<int, int>> alias_ok;
  Target target;                 ///< the machine the code was compiled for
  double pass_seconds = 0.0;     ///< passes + codegen
  double compile_seconds = 0.0;  ///< passes + codegen + host compiler

  /// The dump of one stage ("tensor", "tile", "block", "execution", "pto",
  /// "cpp", "passes") or, for "", all of them under headers.
  std::string dump(const std::string& stage) const;
  /// Shapes of the outputs for given values of the symbolic dims.
  std::vector<std::vector<int64_t>> output_shapes(const std::vector<int64_t>& dyn) const;
  /// Number of tasks the orchestration submits for given symbolic dims: the generated entry run in
  /// the runtime's build mode (no kernel runs) on placeholder tensors of the shapes they give.
  int64_t count_tasks(const std::vector<int64_t>& dyn) const;
  /// True when the orchestration reads scalars from its tensors (its task count depends on data).
  bool reads_tensor_data() const;
  /// Raises NotSupportedError when this CPU cannot run code built for `target`.
  void check_runs_here() const;
  /// The host-features generation at which check_runs_here last passed (0: never): every call
  /// checks, so the answer is kept rather than recomputed.
  mutable std::atomic<uint64_t> runs_here_at{0};
  /// Number of InCore functions.
  int incore_functions() const { return static_cast<int>(ir.execution.functions.size()); }
};

/// Lowers, generates and builds (or loads from the disk cache) a Tensor Graph.
std::shared_ptr<CompiledProgram> compile_program(const TensorGraph& g, const PassOptions& opts);
/// Compiles .pto text: parses it, verifies it, plans each InCore function's
/// buffers, expands dynamic loops (binary_expand), generates and builds.
/// `pto` keeps the planned module before expansion, so it prints back the same.
std::shared_ptr<CompiledProgram> compile_pto(const std::string& text, const PassOptions& opts);
/// The stages `dump` accepts.
const std::vector<std::string>& dump_stages();

}  // namespace pypto::codegen
