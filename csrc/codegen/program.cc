#include "codegen/program.h"

#include <fmt/format.h>

#include <chrono>
#include <functional>
#include <map>

#include "codegen/cpp_emitter.h"
#include "ir/errors.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"

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

int64_t CompiledProgram::count_tasks(const std::vector<int64_t>& dyn) const {
  const auto& names = ir.execution.dyn_dims;
  std::map<std::string, int64_t> env;
  for (size_t i = 0; i < names.size() && i < dyn.size(); ++i) env[names[i]] = dyn[i];
  auto lookup = [&](const std::string& n) -> int64_t {
    auto it = env.find(n);
    if (it == env.end()) throw InternalError("unbound variable " + n);
    return it->second;
  };
  std::function<int64_t(const std::vector<Stmt>&)> walk = [&](const std::vector<Stmt>& body) -> int64_t {
    int64_t n = 0;
    for (const Stmt& s : body) {
      if (std::holds_alternative<Call>(s.node)) {
        ++n;
      } else if (auto* c = std::get_if<IfThen>(&s.node)) {
        n += walk(c->cond.eval(lookup) ? c->then_body : c->else_body);
      } else if (auto* l = std::get_if<Loop>(&s.node)) {
        int64_t start = l->start.eval(lookup), stop = l->stop.eval(lookup), step = l->step.eval(lookup);
        for (int64_t i = start; i < stop; i += step) {
          env[l->var] = i;
          n += walk(l->body);
        }
        env.erase(l->var);
      }
    }
    return n;
  };
  return walk(ir.execution.orchestration);
}

namespace {

/// The .pto text must parse back into a program that prints the same text.
void check_round_trip(const std::string& text, const std::string& name) {
  std::string again = print_pto(parse_pto(text));
  if (again == text) return;
  size_t at = 0, line = 1;
  while (at < text.size() && at < again.size() && text[at] == again[at]) line += text[at++] == '\n';
  throw InternalError(fmt::format("the .pto text of '{}' prints differently after parsing, from line {}", name, line));
}

/// C++ for the Execution Graph, built (or loaded from the cache) and bound.
void generate_and_build(CompiledProgram& p, std::chrono::steady_clock::time_point t0, bool empty_kernels) {
  auto since = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  p.cpp = emit_cpp(p.ir.execution, empty_kernels);
  p.pass_seconds = since();
  p.build = build_library(p.cpp, p.ir.execution.name);
  p.entry = reinterpret_cast<pypto_orchestration_fn>(library_symbol(p.build.handle, kEntrySymbol, p.build.library));
  p.error_message = reinterpret_cast<const char* (*)()>(library_symbol(p.build.handle, kErrorSymbol, p.build.library));
  p.compile_seconds = since();
}

}  // namespace

std::shared_ptr<CompiledProgram> compile_program(const TensorGraph& g, const PassOptions& opts) {
  auto t0 = std::chrono::steady_clock::now();
  auto p = std::make_shared<CompiledProgram>();
  p->ir = run_pipeline(g, opts);
  p->pto = print_pto(p->ir.execution);
  if (opts.verify) check_round_trip(p->pto, g.name);
  generate_and_build(*p, t0, opts.empty_kernels);
  return p;
}

std::shared_ptr<CompiledProgram> compile_pto(const std::string& text, const PassOptions& opts) {
  auto t0 = std::chrono::steady_clock::now();
  auto p = std::make_shared<CompiledProgram>();
  ExecutionGraph g = parse_pto(text);
  if (opts.verify) verify(g);
  p->ir.tensor.name = g.name;
  p->ir.execution = run_pto_pipeline(g, opts, p->ir.passes);
  p->pto = print_pto(plan_execution_buffers(g, opts));
  generate_and_build(*p, t0, opts.empty_kernels);
  return p;
}

}  // namespace pypto::codegen
