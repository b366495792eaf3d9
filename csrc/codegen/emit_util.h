/// Helpers shared by the kernel emitter (kernel_emitter.h) and the orchestration emitter
/// (orchestration_emitter.h): C++ spellings of names and expressions, zero-divisor guards, and the
/// walk that writes FOR loops and IF conditions.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ir/program.h"

namespace pypto::codegen {

/// The C++ name of a scalar or loop variable: prefixed, so that no .pto name collides with C++.
std::string var_name(const std::string& v);
/// `e` as a C++ int64_t expression over var_name()s.
std::string cexpr(const Expr& e);
/// "a, b, c".
std::string list(const std::vector<std::string>& v);
/// The cexpr()s of `v`, comma-separated.
std::string cexprs(const std::vector<Expr>& v);
/// Each dim of a shape as text.
std::vector<std::string> shape_text(const std::vector<Expr>& v);
/// Integers, comma-separated.
std::string ints(const std::vector<int64_t>& v);
/// The divisions of `e` by a symbolic divisor (// or % whose right side is not a constant),
/// innermost first.
void collect_divisions(const Expr& e, std::vector<Expr>& out);

/// Orchestration code reports a zero divisor through its own status, kernel code through the
/// kernel error.
inline constexpr const char* kOrchestrationFail = "pto::zero_error";
inline constexpr const char* kKernelFail = "pto::kernel_zero_error";

/// C++ that returns `fail(message)` when a symbolic divisor in `es` is 0 at run time (the
/// division itself would be undefined), naming the divisor and the division.
std::string zero_guards(const std::vector<Expr>& es, const std::string& pad, const char* fail);

/// Writes a run of statements starting at `body[i]` and returns how many it wrote (0: none).
using RunEmitter = std::function<size_t(const std::vector<Stmt>& body, size_t i, const std::string& pad)>;

/// Writes the FOR loops and IF conditions of `body` as C++; `leaf` writes every other statement
/// (an instruction, a fused run or a call) at its indentation, unless `run` (when given) writes it
/// as part of a run of statements. `fail` reports a zero divisor or a step that is not positive.
void emit_control(std::string& o, const std::vector<Stmt>& body, int indent,
                  const std::function<void(const Stmt&, const std::string&)>& leaf, const RunEmitter* run,
                  const char* fail);

/// Calls `leaf` for every statement of `body` that is not a loop, a condition or a fused run, in
/// program order (both branches of a condition, then before else; a fused run's instructions).
void for_each_leaf(const std::vector<Stmt>& body, const std::function<void(const Stmt&)>& leaf);

}  // namespace pypto::codegen
