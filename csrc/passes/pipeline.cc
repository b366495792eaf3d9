#include "passes/pipeline.h"

#include <fmt/format.h>

#include <chrono>

#include "ir/errors.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/build_orchestration.h"
#include "passes/expand_tiles.h"
#include "passes/forward_tiles.h"
#include "passes/fuse_blocks.h"
#include "passes/fuse_loops.h"
#include "passes/plan_buffers.h"

namespace pypto {

namespace {

/// Passes that only improve a program and may be disabled by name.
const std::set<std::string> kOptional = {"fuse_loops", "forward_tiles"};

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
  static const std::vector<std::string> names = {"expand_tiles",  "fuse_blocks",  "fuse_loops",
                                                 "forward_tiles", "plan_buffers", "build_orchestration"};
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
  PipelineResult r;
  r.tensor = g;
  if (opts.verify) verify(g);
  r.tile = step<TileGraph>(r, "expand_tiles", g, opts, ExpandTiles);
  BlockGraph b = step<BlockGraph>(r, "fuse_blocks", r.tile, opts, FuseBlocks);
  b = optional_step(r, "fuse_loops", b, opts, FuseLoops);
  b = optional_step(r, "forward_tiles", b, opts, ForwardTiles);
  r.block = step<BlockGraph>(r, "plan_buffers", b, opts, PlanBuffers);
  r.execution = step<ExecutionGraph>(r, "build_orchestration", r.block, opts, BuildOrchestration);
  return r;
}

}  // namespace pypto
