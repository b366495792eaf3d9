#include "codegen/program.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>

#include "codegen/cpp_emitter.h"
#include "codegen/emit_util.h"
#include "ir/errors.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "runtime/runtime.h"

namespace pypto::codegen {

const std::vector<std::string>& dump_stages() {
  static const std::vector<std::string> s = {"tensor", "tile", "block", "execution", "pto", "cpp", "passes"};
  return s;
}

namespace {
std::string header(const std::string& title) {
  std::string bar(72, '=');
  return fmt::format("{}\n== {}\n{}\n", bar, title, bar);
}
}  // namespace

std::string CompiledProgram::dump(const std::string& stage) const {
  auto one = [&](const std::string& s) -> std::string {
    if (s == "tensor") return print(ir.tensor);
    if (s == "tile") return print(ir.tile);
    if (s == "block") return print(ir.block);
    if (s == "execution") return print(ir.execution);
    if (s == "pto") return pto;
    if (s == "cpp") return cpp;
    if (s == "passes") {
      std::string out;
      for (const PassRecord& p : ir.passes) {
        std::string state = p.skipped ? (p.ir.empty() ? "skipped (disabled)" : "disabled, plain mode") : (p.changed ? "changed" : "unchanged");
        out += fmt::format("-- pass {} ({:.3f} ms, {})\n", p.name, p.seconds * 1e3, state);
        for (const std::string& n : p.notes) out += fmt::format("   note: {}\n", n);
        out += p.ir;
      }
      return out;
    }
    throw UserError(fmt::format("dump: unknown stage '{}' (expected one of: {})", s, fmt::join(dump_stages(), ", ")));
  };
  if (!stage.empty()) return one(stage);
  static const std::vector<std::pair<std::string, std::string>> titles = {
      {"tensor", "Tensor Graph"}, {"tile", "Tile Graph"}, {"block", "Block Graph"},
      {"execution", "Execution Graph"}, {"pto", "PTO assembly (.pto)"}, {"cpp", "Generated C++"}};
  std::string out;
  for (const auto& [s, title] : titles) out += header(title) + one(s) + "\n";
  return out;
}

std::vector<std::vector<int64_t>> CompiledProgram::output_shapes(const std::vector<int64_t>& dyn) const {
  const auto& names = ir.tensor.dyn_dims;
  if (dyn.size() != names.size())
    throw InternalError(fmt::format("output_shapes: {} symbolic dims given, {} expected", dyn.size(), names.size()));
  auto env = [&](const std::string& n) -> int64_t {
    for (size_t i = 0; i < names.size(); ++i)
      if (names[i] == n) return dyn[i];
    throw InternalError("unbound symbolic dim " + n);
  };
  std::vector<std::vector<int64_t>> out;
  for (int id : ir.tensor.outputs) {
    std::vector<int64_t> s;
    for (const Expr& d : ir.tensor.value(id).shape) s.push_back(d.eval(env));
    out.push_back(s);
  }
  return out;
}

void CompiledProgram::check_runs_here() const {
  const uint64_t generation = host_features_generation();
  if (runs_here_at.load(std::memory_order_relaxed) == generation) return;
  std::vector<std::string> missing = missing_on_host(target);
  if (missing.empty()) {
    runs_here_at.store(generation, std::memory_order_relaxed);
    return;
  }
  std::string what;
  for (const auto& m : missing) what += (what.empty() ? "" : ", ") + m;
  throw NotSupportedError(fmt::format(
      "'{}' was compiled for CPU target {}, whose code this CPU cannot run (it lacks {}); compile it for a "
      "target this CPU has (pypto.set_cpu_target('native') or PYPTO_CPU_TARGET=native)",
      ir.execution.name, target.name, what));
}

bool CompiledProgram::reads_tensor_data() const {
  bool found = false;
  for_each_leaf(ir.execution.orchestration, [&](const Stmt& s) { found = found || std::holds_alternative<ReadScalar>(s.node); });
  return found;
}

int64_t CompiledProgram::count_tasks(const std::vector<int64_t>& dyn) const {
  // The generated entry itself, in the runtime's build mode (no kernel runs, no record is kept), on
  // tensors of the shapes these dims give. Their addresses are distinct and never dereferenced:
  // build mode only tracks regions.
  const ExecutionGraph& g = ir.execution;
  if (entry == nullptr) throw InternalError(fmt::format("count_tasks: '{}' has no loaded entry", g.name));
  if (reads_tensor_data())
    throw NotSupportedError(fmt::format("count_tasks: '{}' reads scalars from its tensors, so its tasks depend on "
                                        "their data; counting them from the shapes alone is not supported", g.name));
  check_runs_here();
  if (dyn.size() != g.dyn_dims.size())
    throw InternalError(fmt::format("count_tasks: {} symbolic dims given, {} expected", dyn.size(), g.dyn_dims.size()));
  auto env = [&](const std::string& n) -> int64_t {
    for (size_t i = 0; i < g.dyn_dims.size(); ++i)
      if (g.dyn_dims[i] == n) return dyn[i];
    throw InternalError("count_tasks: unbound symbolic dim " + n);
  };
  std::vector<int> ids = g.params;
  ids.insert(ids.end(), g.outputs.begin(), g.outputs.end());
  std::vector<pypto_tensor> tensors(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    const MemRef& m = g.memrefs.at(ids[i]);
    pypto_tensor& t = tensors[i];
    t.data = reinterpret_cast<void*>(static_cast<uintptr_t>(i + 1) << 44);
    t.buffer = t.data;
    t.ndim = static_cast<int32_t>(m.shape.size());
    t.elem_size = static_cast<int32_t>(dtype_size(m.dtype));
    int64_t stride = 1;
    for (int d = t.ndim - 1; d >= 0; --d) {
      t.shape[d] = m.shape[d].eval(env);
      t.stride[d] = stride;
      stride *= std::max<int64_t>(t.shape[d], 1);
    }
  }
  int32_t rc = 0;
  runtime::RunStats st = runtime::default_runtime().build([&](const pypto_runtime_api* api) {
    rc = entry(api, tensors.data(), static_cast<int32_t>(tensors.size()), dyn.data(), static_cast<int32_t>(dyn.size()));
  });
  if (rc != 0)
    throw UserError(fmt::format("'{}': counting its tasks for these dims failed: {}", g.name,
                                rc == PYPTO_STATUS_REGION || rc == PYPTO_STATUS_ZERO ? error_message()
                                                                                     : fmt::format("status {}", rc)));
  return st.tasks;
}

namespace {

/// The .pto text must parse back into a program that prints the same text.
void check_round_trip(const std::string& text, const std::string& name) {
  std::string again;
  try {
    again = print_pto(parse_pto(text));
  } catch (const PtoSyntaxError& e) {
    // The text is the compiler's own: a failure to read it back is a compiler bug, not the user's.
    throw InternalError(fmt::format("the .pto text of '{}' does not parse back: {}", name, e.what()));
  }
  if (again == text) return;
  size_t at = 0, line = 1;
  while (at < text.size() && at < again.size() && text[at] == again[at]) line += text[at++] == '\n';
  throw InternalError(fmt::format("the .pto text of '{}' prints differently after parsing, from line {}", name, line));
}

/// The entry tensor (index among parameters then outputs) memref `m` lives in, following views;
/// -1 for workspaces.
int entry_index(const ExecutionGraph& g, int m) {
  while (g.memrefs.at(m).view) m = g.memrefs[m].view->base;
  for (size_t k = 0; k < g.params.size(); ++k)
    if (g.params[k] == m) return static_cast<int>(k);
  for (size_t k = 0; k < g.outputs.size(); ++k)
    if (g.outputs[k] == m) return static_cast<int>(g.params.size() + k);
  return -1;
}

/// Text that is equal for two CALL regions exactly when they address the same elements the same
/// way: the view chain down to the entry tensor, then the offsets and extents.
std::string region_key(const ExecutionGraph& g, const CallArg& a) {
  std::string k;
  std::vector<Expr> offsets = a.offsets;
  for (int m = a.memref; g.memrefs.at(m).view; m = g.memrefs[m].view->base) {
    const MemRef& v = g.memrefs[m];
    // A view that only moves the origin (same rank, dims in order, unit steps): fold its offsets.
    bool shift = !v.view->reshape && v.view->map.size() == offsets.size() &&
                 v.view->offsets.size() == offsets.size();
    for (size_t d = 0; shift && d < v.view->map.size(); ++d)
      shift = v.view->map[d] == static_cast<int>(d) && v.view->steps.at(d) == 1;
    if (shift) {
      for (size_t d = 0; d < offsets.size(); ++d) offsets[d] = offsets[d] + v.view->offsets[d];
      continue;
    }
    for (const Expr& e : offsets) k += " " + e.str();
    offsets.clear();
    k += v.view->reshape ? " reshape" : " view";
    for (const Expr& e : v.shape) k += " " + e.str();
    k += " @";
    for (const Expr& e : v.view->offsets) k += " " + e.str();
    for (int x : v.view->map) k += fmt::format(" m{}", x);
    for (int64_t x : v.view->steps) k += fmt::format(" s{}", x);
    k += ";";
  }
  for (const Expr& e : offsets) k += " " + e.str();
  k += " |";
  for (const Expr& e : a.extents) k += " " + e.str();
  return k;
}

/// Which entry tensors some CALL writes, and which (written, other) pairs may be one array.
void entry_tensor_access(const ExecutionGraph& g, CompiledProgram& p) {
  const size_t n = g.params.size() + g.outputs.size();
  p.written.assign(n, false);
  // read[j][w]: some CALL reads tensor j; clean[j][w] stays true while every such CALL writes w
  // exactly where it reads j.
  std::vector<std::vector<bool>> clean(n, std::vector<bool>(n, true));
  for_each_leaf(g.orchestration, [&](const Stmt& s) {
    const auto* call = std::get_if<Call>(&s.node);
    if (call == nullptr) return;
    const Call& c = *call;
    const InCoreFunction& f = g.functions.at(c.callee);
    std::vector<std::pair<int, std::string>> reads, writes;
    for (size_t i = 0; i < c.args.size() && i < f.params.size(); ++i) {
      int e = entry_index(g, c.args[i].memref);
      if (e < 0) continue;
      if (f.params[i].is_output) p.written[e] = true;
      // An accumulator adds to what other calls add to the same region: no input may share its memory.
      if (f.params[i].accumulate) {
        for (size_t j = 0; j < n; ++j) clean[j][static_cast<size_t>(e)] = false;
        continue;
      }
      (f.params[i].is_output ? writes : reads).emplace_back(e, region_key(g, c.args[i]));
    }
    for (const auto& [j, key] : reads) {
      for (size_t w = 0; w < n; ++w) {
        bool same = false;
        for (const auto& [ww, wkey] : writes) same = same || (ww == static_cast<int>(w) && wkey == key);
        if (!same) clean[j][w] = false;
      }
    }
  });
  p.alias_ok.clear();
  for (size_t w = 0; w < n; ++w)
    for (size_t j = 0; j < n; ++j)
      if (w != j && clean[j][w]) p.alias_ok.emplace_back(static_cast<int>(w), static_cast<int>(j));
}

/// C++ for the Execution Graph, built (or loaded from the cache) and bound.
void generate_and_build(CompiledProgram& p, std::chrono::steady_clock::time_point t0, bool empty_kernels) {
  auto since = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  const std::string prelude = emit_prelude(p.target);
  p.cpp = emit_cpp(p.ir.execution, prelude, empty_kernels);
  entry_tensor_access(p.ir.execution, p);
  p.pass_seconds = since();
  p.build = build_library(p.cpp, p.ir.execution.name, p.target, prelude);
  p.entry = reinterpret_cast<pypto_orchestration_fn>(library_symbol(p.build.handle, kEntrySymbol, p.build.library));
  p.error_message = reinterpret_cast<const char* (*)()>(library_symbol(p.build.handle, kErrorSymbol, p.build.library));
  p.take_kernel_error = reinterpret_cast<int32_t (*)(char*, int32_t)>(
      library_symbol(p.build.handle, kKernelErrorSymbol, p.build.library));
  p.compile_seconds = since();
}

}  // namespace

std::shared_ptr<CompiledProgram> compile_program(const TensorGraph& g, const PassOptions& opts) {
  auto t0 = std::chrono::steady_clock::now();
  auto p = std::make_shared<CompiledProgram>();
  p->target = opts.target;
  p->ir = run_pipeline(g, opts);
  p->pto = print_pto(p->ir.execution);
  if (opts.verify) check_round_trip(p->pto, g.name);
  generate_and_build(*p, t0, opts.empty_kernels);
  return p;
}

std::shared_ptr<CompiledProgram> compile_pto(const std::string& text, const PassOptions& opts) {
  auto t0 = std::chrono::steady_clock::now();
  auto p = std::make_shared<CompiledProgram>();
  p->target = opts.target;
  ExecutionGraph g = parse_pto(text);
  if (opts.verify) verify(g);
  p->ir.tensor.name = g.name;
  ExecutionGraph planned;
  p->ir.execution = run_pto_pipeline(g, opts, p->ir.passes, &planned);
  p->pto = print_pto(planned);
  generate_and_build(*p, t0, opts.empty_kernels);
  return p;
}

}  // namespace pypto::codegen
