/// Options shared by the passes and the record the pipeline keeps of each pass.
#pragma once

#include "ir/target.h"

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace pypto {

/// Knobs of the pass pipeline (pypto.set_pass_options / jit(pass_options=...)).
struct PassOptions {
  bool verify = true;                ///< run the verifier after every pass
  bool fusion = true;                ///< fuse tile nests into shared InCore functions
  std::set<std::string> disabled;    ///< registry names of optional passes to skip
  int64_t sram_budget_kb = 256;      ///< tile-buffer budget of one InCore function
  /// Tile nests (by index) that start a new InCore function: the pipeline
  /// adds cuts when a fused function exceeds the budget.
  std::set<int> cut_before;
  /// Codegen: kernels that return at once (to measure the runtime alone).
  bool empty_kernels = false;
  /// The machine the generated code is compiled for (passes and the emitter read it).
  Target target = target_by_name("native");
  /// plan_matmul_panels: unset, the pass lays b out in panels only on targets whose first-level
  /// data cache is at most kPanelMaxL1dBytes (where that was measured to pay); true, on any target
  /// (still within its shape rules); false, never.
  std::optional<bool> matmul_panels;
};

/// What the pipeline records about one pass run.
struct PassRecord {
  std::string name;
  double seconds = 0.0;
  bool changed = true;
  bool skipped = false;
  std::string ir;  ///< the IR after the pass (empty when unchanged or skipped)
  std::vector<std::string> notes;  ///< decisions the pass made (splits, retiling)
};

/// Records a decision of the pass that is running (dump("passes") shows it under the pass). Outside
/// a pipeline step the note is dropped.
void pass_note(std::string note);

/// The tile-buffer budget of one InCore function, in bytes (PassOptions::sram_budget_kb): the one
/// limit rematerialize, plan_buffers' callers and fuse_chains hold functions to.
inline int64_t buffer_budget_bytes(const PassOptions& opts) { return opts.sram_budget_kb * 1024; }

}  // namespace pypto
