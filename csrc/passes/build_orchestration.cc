// Pass "build_orchestration": Block Graph -> Execution Graph.
//
// Requires: a verified Block Graph.
// Guarantees: the orchestration program runs the launches in order, each as
// a loop nest over its grid whose body CALLs the InCore function with region
// arguments (one task per call at run time). Workspace tensors stay global
// memrefs that the generated orchestration allocates per run.
#include "passes/build_orchestration.h"

namespace pypto {

ExecutionGraph BuildOrchestration(const BlockGraph& g, const PassOptions&) {
  ExecutionGraph out;
  out.name = g.name;
  out.memrefs = g.memrefs;
  out.functions = g.functions;
  out.params = g.params;
  out.outputs = g.outputs;
  out.dyn_dims = g.dyn_dims;
  for (const BlockLaunch& launch : g.launches) {
    std::vector<Stmt> body = {Stmt{launch.call}};
    for (size_t k = launch.grid.size(); k-- > 0;) {
      Loop l = launch.grid[k];
      l.body = std::move(body);
      body = {Stmt{std::move(l)}};
    }
    out.orchestration.insert(out.orchestration.end(), body.begin(), body.end());
  }
  return out;
}

}  // namespace pypto
