/// Level 1, the Tensor Graph: what the user wrote, as SSA values (logical
/// tensors) and tensor ops, each op with the tile configuration active when it
/// was traced and the user's source location.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "ir/expr.h"

namespace pypto {

/// Where an op was written in the user's program.
struct SourceLoc {
  std::string file;
  int line = 0;
  /// "file:line", or "" when unknown.
  std::string str() const;
};

/// Kinds of tensor ops.
enum class TensorOpKind { Add, Sub, Mul, Div, Max, Exp, Amax, Sum };

/// Broad classes of ops, which decide how an op is tiled.
enum class OpClass { Binary, Unary, Reduce };

/// Static facts about an op kind.
struct OpInfo {
  TensorOpKind kind;
  const char* name;  ///< user-facing name, e.g. "amax"
  OpClass cls;
};

/// The facts about `kind`.
const OpInfo& op_info(TensorOpKind kind);
/// Looks an op up by its user-facing name; throws UserError if unknown.
TensorOpKind op_kind_from_name(const std::string& name);

/// A logical tensor (an SSA value).
struct TensorValue {
  int id = -1;
  std::string name;
  std::vector<Expr> shape;
  DataType dtype = DataType::FP32;
};

/// One tensor op.
struct TensorOp {
  TensorOpKind kind;
  std::vector<int> inputs;  ///< value ids
  int output = -1;          ///< value id
  int dim = -1;             ///< reduced dim (non-negative), reductions only
  bool keepdim = false;     ///< reductions only
  std::vector<int64_t> tile_shape;  ///< vec tile shape active when traced
  SourceLoc loc;
};

/// A traced function.
struct TensorGraph {
  std::string name;
  std::vector<TensorValue> values;
  std::vector<int> params;   ///< value ids of the parameters, in order
  std::vector<int> outputs;  ///< value ids returned, in order
  std::vector<TensorOp> ops; ///< in program (topological) order
  std::vector<std::string> dyn_dims;  ///< names of symbolic dims, in scalar-argument order

  const TensorValue& value(int id) const;
};

/// Builds a TensorGraph op by op; every factory checks the op's local
/// invariants and raises a user error naming the op, the source location and
/// the expected versus found value.
class TensorGraphBuilder {
 public:
  explicit TensorGraphBuilder(std::string name);

  /// Adds a parameter; returns its value id.
  int add_param(const std::string& name, const std::vector<Expr>& shape, DataType dtype);
  /// Adds an elementwise binary op with broadcasting.
  int add_binary(TensorOpKind kind, int a, int b, const std::vector<int64_t>& tile, const SourceLoc& loc);
  /// Adds an elementwise unary op.
  int add_unary(TensorOpKind kind, int x, const std::vector<int64_t>& tile, const SourceLoc& loc);
  /// Adds a reduction over `dim` (may be negative).
  int add_reduce(TensorOpKind kind, int x, int dim, bool keepdim, const std::vector<int64_t>& tile,
                 const SourceLoc& loc);
  /// Declares a symbolic dim (its value becomes a scalar argument of the program).
  void add_dyn_dim(const std::string& name);
  /// Marks the returned values.
  void set_outputs(const std::vector<int>& ids);

  const TensorValue& value(int id) const;
  /// The graph built so far (verified).
  TensorGraph finish() const;

 private:
  int new_value(const std::vector<Expr>& shape, DataType dtype);
  void check_value(int id, const char* op, const SourceLoc& loc) const;
  void check_tile(const char* op, const std::vector<int64_t>& tile, size_t rank, const SourceLoc& loc) const;
  TensorGraph g_;
};

/// Formats a shape as "[64, 1024]".
std::string shape_str(const std::vector<Expr>& shape);
/// Formats an int vector as "[32, 32]".
std::string ints_str(const std::vector<int64_t>& v);

}  // namespace pypto
