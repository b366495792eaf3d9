// Pass "build_orchestration": Block Graph -> Execution Graph.
//
// Requires: a verified Block Graph.
// Guarantees: the orchestration program runs the launches in order, each as
// a loop nest over its grid whose body CALLs the InCore function with region
// arguments (one task per call at run time), inside the loops and conditions
// (pypto.loop, symbolic if) the launches were traced in. Workspace tensors
// stay global memrefs that the generated orchestration allocates per run.
#include "passes/build_orchestration.h"

#include <fmt/format.h>

#include <map>
#include <optional>
#include <set>

#include "ir/errors.h"
#include "passes/util.h"

namespace pypto {

namespace {

struct Frame {
  int region;
  std::vector<Stmt> body;
};

/// A read scalar is read when the orchestration reaches it, while the tasks submitted before it may
/// still run: the tensor it reads must be one no task writes.
void check_reads_unwritten(const BlockGraph& g) {
  for (const ScalarRead& r : g.reads) {
    for (const BlockLaunch& l : g.launches) {
      const InCoreFunction& f = g.functions.at(static_cast<size_t>(l.function));
      for (const RegionParam& p : f.params) {
        if (!p.is_output) continue;
        int m = p.memref;
        while (m >= 0 && g.memrefs.at(static_cast<size_t>(m)).view) m = g.memrefs[static_cast<size_t>(m)].view->base;
        if (m == r.value)
          throw NotSupportedError(fmt::format(
              "'{}' reads a scalar from '{}'{} and also writes '{}'; reading a tensor the kernel writes is not "
              "supported yet", g.name, g.memrefs[static_cast<size_t>(m)].name,
              r.loc.str().empty() ? "" : " at " + r.loc.str(), g.memrefs[static_cast<size_t>(m)].name));
      }
    }
  }
}

/// A bound of `e` that holds wherever `e` is evaluated and uses only `fixed` variables: `e` itself
/// when it does; the smaller one's bound of a min whose one side has one; sums and constant
/// multiples of bounds. Empty when there is none.
std::optional<Expr> invariant_bound(const Expr& e, const std::set<std::string>& fixed) {
  bool all_fixed = true;
  for (const std::string& v : vars_of(e)) all_fixed = all_fixed && fixed.count(v);
  if (all_fixed) return e;
  switch (e.kind()) {
    case Expr::Kind::Min: {
      auto a = invariant_bound(e.lhs(), fixed), b = invariant_bound(e.rhs(), fixed);
      if (a && b) return min(*a, *b);
      return a ? a : b;
    }
    case Expr::Kind::Max: {
      auto a = invariant_bound(e.lhs(), fixed), b = invariant_bound(e.rhs(), fixed);
      if (a && b) return max(*a, *b);
      return std::nullopt;
    }
    case Expr::Kind::Add: {
      auto a = invariant_bound(e.lhs(), fixed), b = invariant_bound(e.rhs(), fixed);
      if (a && b) return *a + *b;
      return std::nullopt;
    }
    case Expr::Kind::Mul: {
      auto c = e.lhs().as_const();
      auto other = c ? e.rhs() : e.lhs();
      if (!c) c = e.rhs().as_const();
      if (!c || *c < 0) return std::nullopt;
      auto a = invariant_bound(other, fixed);
      if (a) return Expr(*c) * *a;
      return std::nullopt;
    }
    default: return std::nullopt;
  }
}

/// The orchestration allocates workspaces once, before its loops: a workspace whose shape depends on
/// a loop index or a read scalar is allocated at a bound of that shape (each task still touches only
/// the region its call passes).
void bound_workspaces(ExecutionGraph& g) {
  const std::set<std::string> fixed(g.dyn_dims.begin(), g.dyn_dims.end());
  for (MemRef& m : g.memrefs) {
    if (m.kind != MemKind::Workspace) continue;
    for (Expr& d : m.shape) {
      auto b = invariant_bound(d, fixed);
      if (!b)
        throw NotSupportedError(fmt::format(
            "'{}': the intermediate tensor %{} has a dim of size {}, which depends on a loop index or a read scalar "
            "and has no bound outside the loop (write it as min(N, ...) with a constant N); not supported yet",
            g.name, m.name, d.str()));
      d = *b;
    }
  }
}

}  // namespace

ExecutionGraph BuildOrchestration(const BlockGraph& g, const PassOptions&) {
  ExecutionGraph out;
  out.name = g.name;
  out.memrefs = g.memrefs;
  out.functions = g.functions;
  out.params = g.params;
  out.outputs = g.outputs;
  out.dyn_dims = g.dyn_dims;

  // The reads of each region open its body (top-level ones the orchestration's): every launch and
  // loop bound in the region comes after them.
  auto reads_of = [&](int region) {
    std::vector<Stmt> body;
    for (const ScalarRead& r : g.reads)
      if (r.region == region) body.push_back(Stmt{ReadScalar{r.var, r.value, r.index}});
    return body;
  };
  check_reads_unwritten(g);
  std::vector<Frame> stack{{-1, reads_of(-1)}};
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
    for (size_t i = common; i < path.size(); ++i) stack.push_back(Frame{path[i], reads_of(path[i])});
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
  bound_workspaces(out);
  return out;
}

}  // namespace pypto
