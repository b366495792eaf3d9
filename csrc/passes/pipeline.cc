#include "passes/pipeline.h"

#include <fmt/format.h>

#include <chrono>
#include <map>

#include "ir/errors.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/build_orchestration.h"
#include "passes/expand_tiles.h"
#include "passes/forward_tiles.h"
#include "passes/fuse_blocks.h"
#include "passes/fuse_loops.h"
#include "passes/plan_buffers.h"
#include "passes/rematerialize.h"

namespace pypto {

namespace {

/// Passes that only improve a program and may be disabled by name.
const std::set<std::string> kOptional = {"fuse_loops", "forward_tiles", "rematerialize"};

template <typename Out, typename In, typename Fn>
Out step(PipelineResult& r, const std::string& name, const In& in, const PassOptions& opts, Fn fn) {
  PassRecord rec;
  rec.name = name;
  auto t0 = std::chrono::steady_clock::now();
  Out out = fn(in, opts);
  rec.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (opts.verify) {
    try {
      verify(out);
    } catch (const VerifyError& e) {
      throw VerifyError(fmt::format("after pass '{}': {}", name, e.what()));
    }
  }
  rec.ir = print(out);
  r.passes.push_back(std::move(rec));
  return out;
}

BlockGraph optional_step(PipelineResult& r, const std::string& name, const BlockGraph& in, const PassOptions& opts,
                         BlockGraph (*fn)(const BlockGraph&, const PassOptions&)) {
  if (opts.disabled.count(name)) {
    PassRecord rec;
    rec.name = name;
    rec.skipped = true;
    rec.changed = false;
    r.passes.push_back(rec);
    return in;
  }
  BlockGraph out = step<BlockGraph>(r, name, in, opts, fn);
  std::string before = print(in);
  if (r.passes.back().ir == before) {
    r.passes.back().changed = false;
    r.passes.back().ir.clear();
  }
  return out;
}

}  // namespace

const std::vector<std::string>& pass_names() {
  static const std::vector<std::string> names = {"expand_tiles",  "fuse_blocks",   "fuse_loops",
                                                 "forward_tiles", "rematerialize", "plan_buffers",
                                                 "build_orchestration"};
  return names;
}

PipelineResult run_pipeline(const TensorGraph& g, const PassOptions& opts) {
  for (const auto& d : opts.disabled) {
    if (std::find(pass_names().begin(), pass_names().end(), d) == pass_names().end())
      throw UserError(fmt::format("set_pass_options: unknown pass '{}' (passes: {})", d, fmt::join(pass_names(), ", ")));
    if (!kOptional.count(d))
      throw UserError(fmt::format("set_pass_options: pass '{}' is required and cannot be disabled (optional: {})", d,
                                  fmt::join(kOptional, ", ")));
  }
  if (opts.sram_budget_kb <= 0)
    throw UserError(fmt::format("set_pass_options: sram_budget_kb must be positive, found {}", opts.sram_budget_kb));
  PipelineResult r;
  r.tensor = g;
  if (opts.verify) verify(g);
  r.tile = step<TileGraph>(r, "expand_tiles", g, opts, ExpandTiles);
  std::map<int, int> nest_of_op;
  for (size_t i = 0; i < r.tile.nests.size(); ++i) nest_of_op[r.tile.nests[i].source_op] = static_cast<int>(i);

  // Fuse, then split any InCore function whose buffers exceed the budget in
  // the middle of its chain, until every function fits.
  const int64_t budget = opts.sram_budget_kb * 1024;
  PassOptions cur = opts;
  std::vector<std::string> notes;
  size_t mark = r.passes.size();
  for (;;) {
    r.passes.resize(mark);
    BlockGraph b = step<BlockGraph>(r, "fuse_blocks", r.tile, cur, FuseBlocks);
    size_t fuse_record = r.passes.size() - 1;
    b = optional_step(r, "fuse_loops", b, cur, FuseLoops);
    b = optional_step(r, "forward_tiles", b, cur, ForwardTiles);
    b = optional_step(r, "rematerialize", b, cur, Rematerialize);
    r.block = step<BlockGraph>(r, "plan_buffers", b, cur, PlanBuffers);
    bool split = false;
    for (const InCoreFunction& f : r.block.functions) {
      if (f.buffer_bytes <= budget) continue;
      if (f.source_ops.size() <= 1) {
        const TensorOp& op = g.ops.at(f.source_ops.empty() ? 0 : f.source_ops[0]);
        std::string tile = op.kind == TensorOpKind::Matmul
                               ? fmt::format("cube tile m={}, k={}, n={}", op.cube_tile[0], op.cube_tile[1], op.cube_tile[2])
                               : fmt::format("tile shape {}", ints_str(op.tile_shape));
        throw UserError(fmt::format(
            "pypto.{}{}: with {} it needs {} bytes of tile buffers, more than the buffer budget of {} KB; use smaller "
            "tiles or raise pypto.set_pass_options(sram_budget_kb=...)",
            op_info(op.kind).name, op.loc.file.empty() ? "" : " at " + op.loc.str(), tile, f.buffer_bytes,
            opts.sram_budget_kb));
      }
      int cut = nest_of_op.at(f.source_ops[f.source_ops.size() / 2]);
      cur.cut_before.insert(cut);
      notes.push_back(fmt::format("split @{} ({} bytes > budget {} KB) before {}", f.name, f.buffer_bytes,
                                  opts.sram_budget_kb, r.tile.nests[cut].name));
      split = true;
    }
    if (!split) {
      r.passes[fuse_record].notes = notes;
      break;
    }
  }
  r.execution = step<ExecutionGraph>(r, "build_orchestration", r.block, opts, BuildOrchestration);
  return r;
}

}  // namespace pypto
