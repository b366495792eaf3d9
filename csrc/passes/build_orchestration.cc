// Pass "build_orchestration": Block Graph -> Execution Graph.
//
// Requires: a verified Block Graph.
// Guarantees: the orchestration program runs the launches in order, each as
// a loop nest over its grid whose body CALLs the InCore function with region
// arguments (one task per call at run time), inside the loops and conditions
// (pypto.loop, symbolic if) the launches were traced in. Workspace tensors
// stay global memrefs that the generated orchestration allocates per run.
#include "passes/build_orchestration.h"

#include <map>

#include "ir/errors.h"

namespace pypto {

namespace {

struct Frame {
  int region;
  std::vector<Stmt> body;
};

}  // namespace

ExecutionGraph BuildOrchestration(const BlockGraph& g, const PassOptions&) {
  ExecutionGraph out;
  out.name = g.name;
  out.memrefs = g.memrefs;
  out.functions = g.functions;
  out.params = g.params;
  out.outputs = g.outputs;
  out.dyn_dims = g.dyn_dims;

  std::vector<Frame> stack{{-1, {}}};
  std::map<int, size_t> then_stmt;  // Then region -> index of the IfThen it became in its parent
  auto close = [&]() {
    Frame f = std::move(stack.back());
    stack.pop_back();
    const Region& r = g.regions.at(f.region);
    std::vector<Stmt>& parent = stack.back().body;
    if (r.kind == Region::Kind::Loop) {
      Loop l;
      l.var = r.var;
      l.start = r.start;
      l.stop = r.stop;
      l.step = r.step;
      l.body = std::move(f.body);
      parent.push_back(Stmt{std::move(l)});
    } else if (r.kind == Region::Kind::Then) {
      parent.push_back(Stmt{IfThen{r.cond, std::move(f.body), {}}});
      then_stmt[f.region] = parent.size() - 1;
    } else {
      auto it = then_stmt.find(r.then_region);
      IfThen* prev = (it != then_stmt.end() && it->second + 1 == parent.size())
                         ? std::get_if<IfThen>(&parent.back().node)
                         : nullptr;
      if (prev) prev->else_body = std::move(f.body);
      else parent.push_back(Stmt{IfThen{r.cond, {}, std::move(f.body)}});
    }
  };

  for (const BlockLaunch& launch : g.launches) {
    std::vector<int> path = region_path(g.regions, launch.region);
    // Close regions that do not enclose this launch, open the ones that do.
    size_t common = 0;
    while (common + 1 < stack.size() && common < path.size() && stack[common + 1].region == path[common]) ++common;
    while (stack.size() > common + 1) close();
    for (size_t i = common; i < path.size(); ++i) stack.push_back(Frame{path[i], {}});
    std::vector<Stmt> body = {Stmt{launch.call}};
    for (size_t k = launch.grid.size(); k-- > 0;) {
      Loop l = launch.grid[k];
      l.body = std::move(body);
      body = {Stmt{std::move(l)}};
    }
    auto& cur = stack.back().body;
    cur.insert(cur.end(), body.begin(), body.end());
  }
  while (stack.size() > 1) close();
  out.orchestration = std::move(stack.back().body);
  return out;
}

}  // namespace pypto
