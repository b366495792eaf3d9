#include "passes/pipeline.h"

#include <fmt/format.h>

#include <chrono>
#include <map>

#include "ir/errors.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/binary_expand.h"
#include "passes/build_orchestration.h"
#include "passes/expand_tiles.h"
#include "passes/flatten_loops.h"
#include "passes/forward_tiles.h"
#include "passes/fuse_attention.h"
#include "passes/fuse_blocks.h"
#include "passes/fast_forms.h"
#include "passes/fuse_chains.h"
#include "passes/fuse_loops.h"
#include "passes/plan_buffers.h"
#include "passes/plan_matmul_panels.h"
#include "passes/plan_view_loads.h"
#include "passes/rematerialize.h"
#include "passes/reorder_loops.h"
#include "passes/retile_epilogues.h"
#include "passes/stream_stores.h"
#include "passes/util.h"

namespace pypto {

namespace {

/// Passes that only improve a program and are skipped when disabled by name.
const std::set<std::string> kOptional = {"fuse_attention", "retile_epilogues", "reorder_loops", "fuse_loops", "flatten_loops", "forward_tiles",
                                         "rematerialize", "plan_matmul_panels", "plan_view_loads", "stream_stores", "fuse_chains",
                                         "fast_forms", "binary_expand"};
/// Passes that produce the next level: disabled, they run in a plain mode.
const std::map<std::string, std::string> kPlainMode = {
    {"fuse_blocks", "disabled: one InCore function per tile nest"},
    {"plan_buffers", "disabled: buffers laid out one after another, no reuse"}};

/// The notes of the pass that is running (pass_note), or null outside a step.
thread_local std::vector<std::string>* current_notes = nullptr;

template <typename Out, typename In, typename Fn>
Out step(PipelineResult& r, const std::string& name, const In& in, const PassOptions& opts, Fn fn) {
  PassRecord rec;
  rec.name = name;
  auto t0 = std::chrono::steady_clock::now();
  struct Collect {
    std::vector<std::string>* saved;
    explicit Collect(std::vector<std::string>* n) : saved(current_notes) { current_notes = n; }
    ~Collect() { current_notes = saved; }
  } collect(&rec.notes);
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

template <typename G>
G optional_step(PipelineResult& r, const std::string& name, const G& in, const PassOptions& opts,
                G (*fn)(const G&, const PassOptions&)) {
  if (opts.disabled.count(name)) {
    PassRecord rec;
    rec.name = name;
    rec.skipped = true;
    rec.changed = false;
    r.passes.push_back(rec);
    return in;
  }
  G out = step<G>(r, name, in, opts, fn);
  std::string before = print(in);
  if (r.passes.back().ir == before) {
    r.passes.back().changed = false;
    r.passes.back().ir.clear();
  }
  return out;
}

std::string cube_str(const TensorOp& op) {
  return fmt::format("m={}, k={}, n={}", op.cube_tile[0], op.cube_tile[1], op.cube_tile[2]);
}

/// Halves the largest effective cube tile size of a matmul (k first on ties, then n, then m) or of
/// an attention op (its key block n before its query rows m; the head size k is always whole); none
/// below 8. False when no size can shrink.
bool shrink_cube_tile(const TensorGraph& g, TensorOp& op) {
  const bool attention = op.kind == TensorOpKind::Attention;
  const auto& a = g.value(op.inputs[0]).shape;  // matmul: [.., M, K]; attention: q [.., S, D]
  const auto& o = g.value(op.output).shape;
  const auto& n = attention ? g.value(op.inputs[1]).shape : o;  // attention: kt [.., D, T]
  const Expr* dims[3] = {&o[o.size() - 2], &a.back(), &n.back()};
  constexpr int64_t kMin = 8;
  int best = -1;
  int64_t best_size = kMin;
  static const std::vector<int> kMatmulOrder = {1, 2, 0}, kAttentionOrder = {2, 0};
  for (int i : attention ? kAttentionOrder : kMatmulOrder) {
    auto c = dims[i]->as_const();
    int64_t eff = c ? std::min(*c, op.cube_tile[i]) : op.cube_tile[i];
    if (eff > best_size) best = i, best_size = eff;
  }
  if (best < 0) return false;
  op.cube_tile[best] = std::max(kMin, best_size / 2);
  if (best < static_cast<int>(op.cube_tile_l0.size()))
    op.cube_tile_l0[best] = std::min(op.cube_tile_l0[best], op.cube_tile[best]);
  return true;
}

/// Marks the record of a pass that ran in its plain mode because it was disabled.
void plain_mode(PassRecord& rec, const PassOptions& opts) {
  if (!opts.disabled.count(rec.name)) return;
  rec.skipped = true;
  rec.notes.push_back(kPlainMode.at(rec.name));
}

/// The InCore functions of an Execution Graph (with its memrefs) as a Block Graph without launches.
BlockGraph functions_of(const ExecutionGraph& g) {
  BlockGraph b;
  b.name = g.name;
  b.memrefs = g.memrefs;
  b.functions = g.functions;
  b.dyn_dims = g.dyn_dims;
  return b;
}

/// A Block Graph pass applied to the InCore functions of an Execution Graph.
template <BlockGraph (*Pass)(const BlockGraph&, const PassOptions&)>
ExecutionGraph on_functions(const ExecutionGraph& g, const PassOptions& opts) {
  const BlockGraph b = functions_of(g);
  ExecutionGraph out = g;
  out.functions = Pass(b, opts).functions;
  return out;
}

/// fuse_chains over the functions of an Execution Graph whose functions have memrefs of their own
/// (a parsed or built module): a parameter some CALL binds to a view counts as a view, as the
/// view itself does in a traced program, so both fuse the same runs.
ExecutionGraph fuse_module_chains(const ExecutionGraph& g, const PassOptions& opts) {
  BlockGraph b = functions_of(g);
  for_each_call(g.orchestration, [&](const Call& call) {
    const InCoreFunction& f = g.functions.at(call.callee);
    for (size_t i = 0; i < call.args.size() && i < f.params.size(); ++i) {
      const int param = f.params[i].memref;
      if (g.memrefs.at(call.args[i].memref).kind == MemKind::View && param != call.args[i].memref)
        b.memrefs.at(param).kind = MemKind::View;
    }
  });
  ExecutionGraph out = g;
  out.functions = FuseChains(b, opts).functions;
  return out;
}

}  // namespace

void pass_note(std::string note) {
  if (current_notes != nullptr) current_notes->push_back(std::move(note));
}

const std::vector<std::string>& pass_names() {
  static const std::vector<std::string> names = {"fuse_attention", "retile_epilogues", "expand_tiles", "reorder_loops",
                                                 "fuse_blocks",
                                                 "fuse_loops",    "flatten_loops", "forward_tiles",
                                                 "rematerialize", "plan_buffers",  "plan_matmul_panels",
                                                 "plan_view_loads",
                                                 "stream_stores", "fuse_chains",   "fast_forms",    "build_orchestration",
                                                 "binary_expand"};
  return names;
}

PipelineResult run_pipeline(const TensorGraph& g, const PassOptions& opts) {
  for (const auto& d : opts.disabled) {
    if (std::find(pass_names().begin(), pass_names().end(), d) == pass_names().end())
      throw UserError(fmt::format("set_pass_options: unknown pass '{}' (passes: {})", d, fmt::join(pass_names(), ", ")));
    if (!kOptional.count(d) && !kPlainMode.count(d))
      throw UserError(fmt::format(
          "set_pass_options: pass '{}' builds the next graph level and cannot be disabled (expand_tiles and "
          "build_orchestration are required)",
          d));
  }
  if (opts.sram_budget_kb <= 0)
    throw UserError(fmt::format("set_pass_options: sram_budget_kb must be positive, found {}", opts.sram_budget_kb));
  PipelineResult r;
  r.tensor = g;
  if (opts.verify) verify(g);
  // Tile, fuse and plan; then, until every InCore function fits the budget,
  // split a fused chain over budget at its midpoint, or shrink the cube tile
  // of a matmul or the blocks of an attention op that is over budget on its own
  // (or whose epilogue, retiled to its output tile, is; fusion then starts over).
  const int64_t budget = buffer_budget_bytes(opts);
  TensorGraph work = optional_step<TensorGraph>(r, "fuse_attention", g, opts, FuseAttention);
  const PassRecord graph_record = r.passes.back();
  PassOptions cur = opts;
  std::vector<std::string> split_notes;
  std::map<int, std::string> shrunk;  // matmul op -> its cube tile before shrinking
  for (;;) {
    r.passes = {graph_record};
    // After the cube tiles are final (the budget loop may shrink them): the epilogues take them.
    TensorGraph tiled = optional_step<TensorGraph>(r, "retile_epilogues", work, opts, RetileEpilogues);
    r.tile = step<TileGraph>(r, "expand_tiles", tiled, opts, ExpandTiles);
    for (const auto& [i, from] : shrunk)
      r.passes.back().notes.push_back(fmt::format("shrank the cube tile of {}_{} from {} to {} to fit the budget of {} KB",
                                                  op_info(work.ops[i].kind).name, i, from, cube_str(work.ops[i]),
                                                  opts.sram_budget_kb));
    TileGraph before = r.tile;
    r.tile = optional_step<TileGraph>(r, "reorder_loops", r.tile, opts, ReorderLoops);
    for (size_t i = 0; i < r.tile.nests.size(); ++i)
      if (r.tile.nests[i].note != before.nests[i].note)
        r.passes.back().notes.push_back(fmt::format("@{}: {}", r.tile.nests[i].name, r.tile.nests[i].note));
    std::map<int, int> nest_of_op;
    for (size_t i = 0; i < r.tile.nests.size(); ++i) nest_of_op[r.tile.nests[i].source_op] = static_cast<int>(i);

    BlockGraph b = step<BlockGraph>(r, "fuse_blocks", r.tile, cur, FuseBlocks);
    size_t fuse_record = r.passes.size() - 1;
    plain_mode(r.passes.back(), cur);
    b = optional_step(r, "fuse_loops", b, cur, FuseLoops);
    b = optional_step(r, "flatten_loops", b, cur, FlattenLoops);
    b = optional_step(r, "forward_tiles", b, cur, ForwardTiles);
    b = optional_step(r, "rematerialize", b, cur, Rematerialize);
    r.block = step<BlockGraph>(r, "plan_buffers", b, cur, PlanBuffers);
    plain_mode(r.passes.back(), cur);
    bool again = false;
    for (const InCoreFunction& f : r.block.functions) {
      if (f.buffer_bytes <= budget) continue;
      again = true;
      if (f.source_ops.size() <= 1) {
        const int source = f.source_ops.empty() ? 0 : f.source_ops[0];
        // An epilogue that took a matmul's output tile (retile_epilogues) shrinks with that matmul.
        const int owner = tiled.ops.at(source).retiled_from >= 0 ? tiled.ops.at(source).retiled_from : source;
        TensorOp& cube_op = work.ops.at(owner);
        if (cube_op.kind == TensorOpKind::Matmul || cube_op.kind == TensorOpKind::Attention) {
          std::string from = cube_str(cube_op);
          if (shrink_cube_tile(work, cube_op)) {
            shrunk.emplace(owner, from);
            if (owner != source) {
              // The chains split while the epilogue had the larger tile may fit whole with the
              // smaller one: fusion starts over.
              cur.cut_before = opts.cut_before;
              split_notes.clear();
            }
            continue;
          }
        }
        const TensorOp& op = work.ops.at(source);
        std::string tile = op.kind == TensorOpKind::Matmul || op.kind == TensorOpKind::Conv
                               ? "cube tile " + cube_str(op)
                                                           : fmt::format("tile shape {}", ints_str(op.tile_shape));
        throw UserError(fmt::format(
            "pypto.{}{}: with {} it needs {} bytes of tile buffers, more than the buffer budget of {} KB; use smaller "
            "tiles or raise pypto.set_pass_options(sram_budget_kb=...)",
            op.label.empty() ? std::string(op_info(op.kind).name) : op.label,
            op.loc.file.empty() ? "" : " at " + op.loc.str(), tile, f.buffer_bytes,
            opts.sram_budget_kb));
      }
      int cut = nest_of_op.at(f.source_ops[f.source_ops.size() / 2]);
      cur.cut_before.insert(cut);
      split_notes.push_back(fmt::format("split @{} ({} bytes > budget {} KB) before {}", f.name, f.buffer_bytes,
                                        opts.sram_budget_kb, r.tile.nests[cut].name));
    }
    if (!again) {
      auto& rec_notes = r.passes[fuse_record].notes;
      rec_notes.insert(rec_notes.end(), split_notes.begin(), split_notes.end());
      break;
    }
  }
  // Decisions on how the kernels run, once the buffers are final.
  r.block = optional_step(r, "plan_matmul_panels", r.block, cur, PlanMatmulPanels);
  r.block = optional_step(r, "plan_view_loads", r.block, cur, PlanViewLoads);
  r.block = optional_step(r, "stream_stores", r.block, cur, StreamStores);
  r.block = optional_step(r, "fuse_chains", r.block, cur, FuseChains);
  r.block = optional_step(r, "fast_forms", r.block, cur, FastForms);
  r.execution = step<ExecutionGraph>(r, "build_orchestration", r.block, opts, BuildOrchestration);
  r.execution = optional_step<ExecutionGraph>(r, "binary_expand", r.execution, opts, BinaryExpand);
  return r;
}

ExecutionGraph plan_execution_buffers(const ExecutionGraph& g, const PassOptions& opts) {
  return on_functions<PlanBuffers>(g, opts);
}

ExecutionGraph run_pto_pipeline(const ExecutionGraph& g, const PassOptions& opts, std::vector<PassRecord>& records,
                                ExecutionGraph* planned_out) {
  PipelineResult r;
  ExecutionGraph planned = step<ExecutionGraph>(r, "plan_buffers", g, opts, plan_execution_buffers);
  plain_mode(r.passes.back(), opts);
  planned = optional_step<ExecutionGraph>(r, "plan_matmul_panels", planned, opts, on_functions<PlanMatmulPanels>);
  planned = optional_step<ExecutionGraph>(r, "plan_view_loads", planned, opts, on_functions<PlanViewLoads>);
  planned = optional_step<ExecutionGraph>(r, "stream_stores", planned, opts, on_functions<StreamStores>);
  planned = optional_step<ExecutionGraph>(r, "fuse_chains", planned, opts, fuse_module_chains);
  planned = optional_step<ExecutionGraph>(r, "fast_forms", planned, opts, on_functions<FastForms>);
  if (planned_out != nullptr) *planned_out = planned;
  ExecutionGraph out = optional_step<ExecutionGraph>(r, "binary_expand", planned, opts, BinaryExpand);
  records = r.passes;
  return out;
}

}  // namespace pypto
