/// The pass pipeline: Tensor Graph -> Tile -> Block -> Execution Graph.
#pragma once

#include <string>
#include <vector>

#include "ir/program.h"
#include "ir/tensor_graph.h"
#include "passes/pass.h"

namespace pypto {

/// Every level of one compiled program, and what each pass did.
struct PipelineResult {
  TensorGraph tensor;
  TileGraph tile;
  BlockGraph block;
  ExecutionGraph execution;
  std::vector<PassRecord> passes;
};

/// Names of all passes, in pipeline order (the registry).
const std::vector<std::string>& pass_names();
/// Runs every pass in order, verifying after each when `opts.verify`.
PipelineResult run_pipeline(const TensorGraph& g, const PassOptions& opts);
/// plan_buffers over the InCore functions of an Execution Graph.
ExecutionGraph plan_execution_buffers(const ExecutionGraph& g, const PassOptions& opts);
/// The passes of a .pto module (an Execution Graph written with the tile-level
/// API or parsed from text): plan_buffers, plan_matmul_panels, plan_view_loads, stream_stores,
/// fuse_chains, fast_forms, then binary_expand; records each.
/// `planned` (when given) receives the program before binary_expand: the module as written, with
/// the decisions of plan_buffers, plan_matmul_panels, plan_view_loads, stream_stores and fuse_chains.
ExecutionGraph run_pto_pipeline(const ExecutionGraph& g, const PassOptions& opts, std::vector<PassRecord>& records,
                                ExecutionGraph* planned = nullptr);

}  // namespace pypto
