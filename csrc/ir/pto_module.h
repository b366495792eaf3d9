/// The tile-level API's modules (pypto.pto.PTOModule): functions written with
/// PTOFunctionBuilder directly in the IR's statements (program.h), before
/// link_module turns a module into the ExecutionGraph that the printer prints
/// and codegen compiles.
///
/// A module is looser than an ExecutionGraph, as a user writes it: InCore
/// functions may call InCore functions and orchestration functions may call
/// orchestration functions (link_module inlines both), calls name their callee
/// and bind arguments by parameter name, a call's offsets may count blocks of
/// the callee's parameter, and an InCore parameter may leave its shape to be
/// worked out from the tiles moved through it.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ir/program.h"

namespace pypto {

/// A region argument of a call by parameter name.
struct NamedArg {
  std::string param;
  int memref = -1;                            ///< memref of the calling function
  std::optional<std::vector<Expr>> offsets;   ///< absent: all zero
  std::optional<std::vector<Expr>> extents;   ///< absent: the callee parameter's block
  bool block_units = false;                   ///< offsets count blocks of the parameter, not elements
};

/// A call as the builder writes it; link_module resolves it into a Call.
struct NamedCall {
  std::string callee;
  std::vector<NamedArg> args;
  std::vector<std::pair<std::string, Expr>> scalars;
  std::string where;  ///< file:line of the builder call, for messages
};

/// One function of a module. Statements use the IR's nodes; a call is a Call
/// whose `named` is set. Memref and tile ids index `memrefs` and `tiles`.
struct ModuleFunction {
  std::string name;
  bool in_core = true;
  std::string where;                 ///< file:line of the builder, for messages
  std::vector<MemRef> memrefs;       ///< Input/Output parameters, Local, Workspace and View memrefs
  std::vector<bool> sized;           ///< per memref: declared with a shape
  std::vector<TileDecl> tiles;
  std::vector<std::pair<std::string, DataType>> scalars;
  std::vector<Stmt> body;
  std::vector<std::string> fused_ops;
};

struct PtoModule {
  std::string name;
  std::vector<ModuleFunction> functions;
};

/// The module as an ExecutionGraph with `entry` as its orchestration: calls
/// between InCore functions and between orchestration functions inlined, call
/// offsets in elements, each InCore parameter's block (the bounding box of
/// the tiles moved through it where no shape was given) as its extents, and
/// the InCore functions in the order the orchestration first calls them, then
/// their `<name>_<rows>` variants. An InCore entry gets an orchestration
/// `<entry>_entry` that calls it once on whole tensors. Throws UserError for a
/// module that cannot be linked.
ExecutionGraph link_module(const PtoModule& module, const std::string& entry);

/// Builds one ModuleFunction statement by statement; names resolve to ids.
class FunctionBuilder {
 public:
  explicit FunctionBuilder(std::string name, std::string where);

  const std::string& name() const { return fn_.name; }
  void set_in_core(bool in_core) { fn_.in_core = in_core; }
  bool in_core() const { return fn_.in_core; }
  void set_fused_ops(std::vector<std::string> ops) { fn_.fused_ops = std::move(ops); }

  /// Declarations. `shape` absent: an unsized parameter (see ModuleFunction::sized).
  /// `zeroed` false: a workspace whose every element is written before it is read (MemRef::zeroed).
  int memref(const std::string& name, MemKind kind, DataType dtype, const std::optional<std::vector<Expr>>& shape,
             bool zeroed = true);
  int view(const std::string& name, const std::string& base, DataType dtype, const std::vector<Expr>& shape,
           const std::vector<Expr>& offsets, const std::vector<int>& map, const std::vector<int64_t>& steps,
           bool reshape);
  int tile(const std::string& name, const std::vector<int64_t>& shape, DataType dtype);
  void scalar(const std::string& name, DataType dtype);
  /// A parameter becomes an output (printed `out`).
  void mark_output(const std::string& memref);

  /// -1 when there is none of that name.
  int memref_id(const std::string& name) const;
  int tile_id(const std::string& name) const;
  const MemRef& memref_at(int id) const { return fn_.memrefs.at(id); }
  const TileDecl& tile_at(int id) const { return fn_.tiles.at(id); }
  bool has_scalar(const std::string& name) const;

  /// Statements, appended to the innermost open FOR or IF.
  void add(Instr in);
  void call(NamedCall c);
  void begin_for(Loop loop);
  void begin_if(const Expr& cond);
  /// False when the innermost open block is not an IF in its THEN part.
  bool begin_else();
  /// Closes the innermost block if it is a FOR (`loop`) or an IF; false otherwise.
  bool end(bool loop);
  /// "for", "if" or "" for the innermost open block.
  std::string open_block() const;

  /// The finished function (the builder is left empty).
  ModuleFunction build();

 private:
  struct Open {
    bool is_loop = true;
    Loop loop;
    IfThen cond;
    bool in_else = false;
  };
  std::vector<Stmt>& body();
  ModuleFunction fn_;
  std::vector<Open> open_;
};

}  // namespace pypto
