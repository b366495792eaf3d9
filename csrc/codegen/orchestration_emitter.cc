#include "codegen/orchestration_emitter.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "codegen/cpp_emitter.h"
#include "codegen/emit_util.h"
#include "ir/errors.h"

namespace pypto::codegen {

namespace {

/// Emits the orchestration entry point.
class OrchestrationEmitter {
 public:
  OrchestrationEmitter(const ExecutionGraph& g, const std::vector<FunctionBounds>& bounds)
      : g_(g), bounds_(bounds), call_memrefs_(call_memrefs()) {}

  std::string emit() {
    std::string o = fmt::format(
        "// Orchestration @{}\nextern \"C\" {} int32_t {}(const pypto_runtime_api* api, const pypto_tensor* tensors, "
        "int32_t ntensors, const int64_t* scalars, int32_t nscalars) {{\n",
        g_.name, kControlCode, kEntrySymbol);
    size_t nt = g_.params.size() + g_.outputs.size();
    o += fmt::format("  if (ntensors != {} || nscalars != {}) return PYPTO_STATUS_ARGUMENTS;\n", nt, g_.dyn_dims.size());
    o += "  void* rt = api->rt;\n";
    for (size_t i = 0; i < g_.dyn_dims.size(); ++i)
      o += fmt::format("  const int64_t {} = scalars[{}];\n", var_name(g_.dyn_dims[i]), i);
    size_t ti = 0;
    for (int id : g_.params) o += fmt::format("  const pypto_tensor& m{} = tensors[{}];  // %{}\n", id, ti++, g_.memrefs[id].name);
    for (int id : g_.outputs) o += fmt::format("  const pypto_tensor& m{} = tensors[{}];  // %{}\n", id, ti++, g_.memrefs[id].name);
    for (const MemRef& m : g_.memrefs) {
      if (m.kind != MemKind::Workspace || !used(m.id)) continue;
      o += zero_guards(m.shape, "  ", kOrchestrationFail);
      o += fmt::format("  const int64_t m{}_shape[] = {{{}}};\n", m.id, cexprs(m.shape));
      o += fmt::format("  const pypto_tensor m{} = pto::make_workspace(api, {}, m{}_shape, {}, {});  // %{}\n", m.id,
                       m.shape.size(), m.id, dtype_size(m.dtype), m.zeroed ? "true" : "false", m.name);
    }
    collect_loop_vars(g_.orchestration);
    // Views that do not depend on a loop variable are built once; every tensor a call names gets
    // its runtime handle up front, so a task is submitted in one call.
    std::set<int> views;
    for (int id : call_memrefs_) {
      if (!loop_invariant(id)) continue;
      emit_view(o, id, "  ", views);
      o += fmt::format("  const int32_t h{} = api->tensor_handle(rt, &m{});\n", id, id);
      o += fmt::format("  if (h{} < 0) return PYPTO_STATUS_FAILED;\n", id);
      hoisted_.insert(id);
    }
    emit_parts(o);
    o += "  return api->failed(rt) ? 1 : 0;\n}\n\n";
    o += fmt::format("extern \"C\" int32_t {}(void) {{ return PYPTO_ABI_VERSION; }}\n", kAbiSymbol);
    o += fmt::format("extern \"C\" const char* {}(void) {{ return pto::region_error_text(); }}\n", kErrorSymbol);
    o += fmt::format("extern \"C\" int32_t {}(char* out, int32_t cap) {{ return pto::take_kernel_error(out, cap); }}\n",
                     kKernelErrorSymbol);
    return o;
  }

 private:
  void collect_loop_vars(const std::vector<Stmt>& body) {
    for (const Stmt& s : body) {
      if (auto* l = std::get_if<Loop>(&s.node)) {
        loop_vars_.insert(l->var);
        collect_loop_vars(l->body);
      } else if (auto* i = std::get_if<IfThen>(&s.node)) {
        collect_loop_vars(i->then_body);
        collect_loop_vars(i->else_body);
      } else if (auto* r = std::get_if<ReadScalar>(&s.node)) {
        loop_vars_.insert(r->var);  // bound where it is read: nothing using it is hoisted above that
      }
    }
  }

  bool uses_loop_var(const Expr& e) const {
    for (const std::string& v : loop_vars_) {
      if (e.uses(v)) return true;
    }
    return false;
  }

  /// True when memref `id` (a view chain or a whole tensor) is the same in every iteration.
  bool loop_invariant(int id) const {
    for (int m = id; g_.memrefs[m].view; m = g_.memrefs[m].view->base) {
      for (const Expr& e : g_.memrefs[m].shape) {
        if (uses_loop_var(e)) return false;
      }
      for (const Expr& e : g_.memrefs[m].view->offsets) {
        if (uses_loop_var(e)) return false;
      }
    }
    return true;
  }

  /// The memrefs named by call arguments, in order of first appearance.
  std::vector<int> call_memrefs() const {
    std::vector<int> out;
    std::set<int> seen;
    for_each_leaf(g_.orchestration, [&](const Stmt& s) {
      if (auto* c = std::get_if<Call>(&s.node)) {
        for (const CallArg& a : c->args) {
          if (seen.insert(a.memref).second) out.push_back(a.memref);
        }
      }
    });
    return out;
  }

  /// True when some call uses memref `id`: names it, or a view built on it.
  bool used(int id) const {
    for (int m : call_memrefs_) {
      for (;; m = g_.memrefs[m].view->base) {
        if (m == id) return true;
        if (!g_.memrefs[m].view) break;
      }
    }
    return false;
  }

  /// Declares the descriptor of view memref `id` (and of the views it is built on).
  void emit_view(std::string& o, int id, const std::string& pad, std::set<int>& done) {
    const MemRef& m = g_.memrefs[id];
    if (!m.view || done.count(id)) return;
    emit_view(o, m.view->base, pad, done);
    done.insert(id);
    const ViewMap& v = *m.view;
    std::vector<Expr> exprs = m.shape;
    exprs.insert(exprs.end(), v.offsets.begin(), v.offsets.end());
    o += zero_guards(exprs, pad, kOrchestrationFail);
    o += fmt::format("{}const int64_t m{}_shape[] = {{{}}};\n", pad, id, cexprs(m.shape));
    if (v.reshape) {
      o += fmt::format("{}int m{}_ok = 1;\n", pad, id);
      o += fmt::format("{}const pypto_tensor m{} = pto::make_reshape(m{}, {}, m{}_shape, {}, &m{}_ok);  // %{}\n", pad, id,
                       v.base, m.shape.size(), id, dtype_size(m.dtype), id, m.name);
      o += fmt::format("{}if (!m{}_ok) return PYPTO_STATUS_RESHAPE;\n", pad, id);
      o += fmt::format("{}if (int32_t bad = pto::check_reshape(m{}, {}, m{}_shape, {}, \"reshape %{} of %{}\")) return bad;\n",
                       pad, v.base, m.shape.size(), id, dtype_size(m.dtype), m.name, g_.memrefs[v.base].name);
      return;
    }
    std::vector<std::string> map, steps;
    for (int x : v.map) map.push_back(std::to_string(x));
    for (int64_t x : v.steps) steps.push_back(std::to_string(x));
    o += fmt::format("{}const int64_t m{}_off[] = {{{}}}; const int32_t m{}_map[] = {{{}}}; const int64_t m{}_step[] = {{{}}};\n",
                     pad, id, cexprs(v.offsets), id, list(map), id, list(steps));
    o += fmt::format("{}pypto_tensor m{};  // %{}\n", pad, id, m.name);
    o += fmt::format("{}if (int32_t bad = pto::make_view(&m{}, m{}, {}, m{}_shape, m{}_off, m{}_map, m{}_step, \"view %{} of %{}\")) return bad;\n",
                     pad, id, v.base, m.shape.size(), id, id, id, id, m.name, g_.memrefs[v.base].name);
  }

  /// The orchestration is control code (loops, index arithmetic, one runtime call per task): the
  /// host compiler builds it at -O1, whatever the kernels' level. At -O3 GCC spent most of a long
  /// program's compile time on it (unrolling and peeling loops that only submit tasks).
  static constexpr const char* kControlCode = "__attribute__((optimize(\"O1\")))";

  /// The top-level statements. A long orchestration (binary expansion copies each loop nest per
  /// block size) puts each one in a lambda the host compiler keeps out of line: one function of
  /// several hundred task submissions took GCC's -O3 minutes (its register liveness grows faster
  /// than the function), while the parts compile in seconds and cost one call each.
  void emit_parts(std::string& o) {
    size_t calls = 0;
    for_each_leaf(g_.orchestration, [&](const Stmt&) { ++calls; });
    if (calls <= kCallsPerFunction) {
      emit_body(o, g_.orchestration, 1);
      return;
    }
    for (const Stmt& s : g_.orchestration) {
      if (std::holds_alternative<ReadScalar>(s.node)) {  // later parts use it
        emit_body(o, {s}, 1);
        continue;
      }
      o += fmt::format("  {{\n    auto part = [&]() __attribute__((noinline)) {} -> int32_t {{\n", kControlCode);
      emit_body(o, {s}, 3);
      o += "      return 0;\n    };\n    if (int32_t status = part()) return status;\n  }\n";
    }
  }

  static constexpr size_t kCallsPerFunction = 48;

  void emit_body(std::string& o, const std::vector<Stmt>& body, int indent) {
    emit_control(o, body, indent, [&](const Stmt& s, const std::string& pad) {
      if (auto* c = std::get_if<Call>(&s.node)) emit_call(o, *c, pad);
      else if (auto* r = std::get_if<ReadScalar>(&s.node)) emit_read(o, *r, pad);
      else throw InternalError("tile instruction in the orchestration");
    }, nullptr, kOrchestrationFail);
  }

  /// `int64_t var`: the element of an entry tensor at an index checked against its shape.
  void emit_read(std::string& o, const ReadScalar& r, const std::string& pad) {
    const MemRef& m = g_.memrefs.at(static_cast<size_t>(r.memref));
    o += zero_guards(r.index, pad, kOrchestrationFail);
    o += fmt::format("{}const int64_t {}_at[] = {{{}}};\n", pad, var_name(r.var), cexprs(r.index));
    o += fmt::format("{}int64_t {} = 0;\n", pad, var_name(r.var));
    o += fmt::format("{}if (int32_t bad = pto::read_scalar<{}, {}>(&{}, m{}, {}_at, \"READ %{} <- %{}\")) return bad;\n",
                     pad, dtype_cpp_type(m.dtype), r.index.size(), var_name(r.var), r.memref, var_name(r.var), r.var,
                     m.name);
  }

  void emit_call(std::string& o, const Call& c, const std::string& pad) {
    const InCoreFunction& f = g_.functions.at(c.callee);
    const std::string in = pad + "  ";
    o += fmt::format("{}{{\n", pad);
    std::set<int> views, handles;
    for (const CallArg& a : c.args) {
      if (hoisted_.count(a.memref) || !handles.insert(a.memref).second) continue;
      emit_view(o, a.memref, in, views);
      o += fmt::format("{}const int32_t h{} = api->tensor_handle(rt, &m{});\n", in, a.memref, a.memref);
    }
    const std::vector<CallCheck> checks = call_checks(c, f, bounds_.at(c.callee), g_.memrefs);
    {
      std::vector<Expr> exprs = c.scalars;
      for (const CallArg& a : c.args) {
        exprs.insert(exprs.end(), a.offsets.begin(), a.offsets.end());
        exprs.insert(exprs.end(), a.extents.begin(), a.extents.end());
      }
      for (const CallCheck& k : checks) {
        for (const auto& e : {k.lo, k.hi}) if (e) exprs.push_back(*e);
        if (k.arg < 0) exprs.push_back(k.limit);
      }
      o += zero_guards(exprs, in, kOrchestrationFail);
    }
    std::vector<std::string> args;
    for (size_t i = 0; i < c.args.size(); ++i) {
      const CallArg& a = c.args[i];
      // A region of a view is cut to the part inside the view's base; any other must lie inside its tensor.
      const bool view = g_.memrefs[a.memref].kind == MemKind::View;
      o += fmt::format("{}const int64_t o{}[] = {{{}}}; {}int64_t e{}[] = {{{}}};\n", in, i, cexprs(a.offsets),
                       view ? "" : "const ", i, cexprs(a.extents));
      o += fmt::format("{}if (int32_t bad = pto::{}<{}>(m{}, o{}, e{}, \"CALL @{} argument %{} -> %{}\")) return bad;\n",
                       in, view ? "clip_region" : "check_region", a.offsets.size(), a.memref, i, i, f.name,
                       f.params[i].name, g_.memrefs[a.memref].name);
      args.push_back(fmt::format("{{h{}, {}, o{}, e{}}}", a.memref,
                                 f.params[i].accumulate ? "PYPTO_ACCESS_ACCUM"
                                 : f.params[i].is_output ? "PYPTO_ACCESS_OUT"
                                                         : "PYPTO_ACCESS_IN",
                                 i, i));
    }
    if (!args.empty()) o += fmt::format("{}const pypto_task_arg args[] = {{{}}};\n", in, list(args));
    // The callee's accesses stay inside what this call passes (bounds that hold for every value
    // were dropped at compile time).
    for (const CallCheck& k : checks) {
      o += fmt::format("{}if (int32_t bad = pto::check_bound({}, {}, {}, {}, \"{}\")) return bad;\n", in,
                       k.lo ? cexpr(*k.lo) : "INT64_C(0)", k.hi ? cexpr(*k.hi) : "INT64_C(0)",
                       k.arg >= 0 ? fmt::format("e{}[{}]", k.arg, k.dim) : cexpr(k.limit), k.dim,
                       k.what);
    }
    if (!c.scalars.empty()) o += fmt::format("{}const int64_t sc[] = {{{}}};\n", in, cexprs(c.scalars));
    o += fmt::format("{}const pypto_task_desc d = {{\"{}\", &k_{}, {}, {}, {}, {}, {}}};\n", in, f.name, f.name,
                     f.buffer_bytes, args.empty() ? "nullptr" : "args", c.scalars.empty() ? "nullptr" : "sc", args.size(),
                     c.scalars.size());
    o += fmt::format("{}if (api->task_submit_desc(rt, &d)) return PYPTO_STATUS_FAILED;\n{}}}\n", in, pad);
  }

  const ExecutionGraph& g_;
  const std::vector<FunctionBounds>& bounds_;  // per function, as g_.functions
  std::vector<int> call_memrefs_;  // memrefs named by call arguments, in order of first appearance
  std::set<std::string> loop_vars_;
  std::set<int> hoisted_;  // memrefs whose view and handle are built before the loops
};

}  // namespace

std::string emit_orchestration(const ExecutionGraph& g, const std::vector<FunctionBounds>& bounds) {
  return OrchestrationEmitter(g, bounds).emit();
}

}  // namespace pypto::codegen
