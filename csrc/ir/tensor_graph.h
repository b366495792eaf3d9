/// Level 1, the Tensor Graph: what the user wrote, as SSA values (logical
/// tensors) and tensor ops, each op with the tile configuration active when it
/// was traced and the user's source location.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "ir/expr.h"
#include "ir/op_table.h"

namespace pypto {

/// Where an op was written in the user's program.
struct SourceLoc {
  std::string file;
  int line = 0;
  /// "file:line", or "" when unknown.
  std::string str() const;
};

/// How a view addresses its base: view dim v walks base dim map[v] (-1: a
/// new or broadcast dim, stride 0) with step steps[v], from `offsets` (one per
/// base dim). A reshape instead reinterprets a contiguous base.
struct ViewMap {
  int base = -1;
  std::vector<Expr> offsets;
  std::vector<int> map;
  std::vector<int64_t> steps;
  bool reshape = false;
};

/// A logical tensor (an SSA value).
struct TensorValue {
  int id = -1;
  std::string name;
  std::vector<Expr> shape;
  DataType dtype = DataType::FP32;
  std::vector<Expr> valid;       ///< valid extent per dim (a tail when smaller than `shape`)
  std::optional<ViewMap> view;   ///< set when the value aliases another tensor's memory
};

/// True when `v` has a tail: a valid extent smaller than its shape in some dim.
bool has_tail(const TensorValue& v);

/// An operand of an elementwise op: a tensor value or a constant.
struct Operand {
  int value = -1;            ///< tensor value id, or -1 for a constant
  double constant = 0.0;     ///< the constant (when value < 0 and no `sym`)
  std::optional<Expr> sym;   ///< a symbolic integer constant (dynamic dims, loop indices)
  bool is_float = false;     ///< constant written as a float (for type promotion)
  bool is_bool = false;      ///< constant written as a bool

  bool is_tensor() const { return value >= 0; }
  static Operand tensor(int id) { Operand o; o.value = id; return o; }
  static Operand scalar(double v, bool is_float, bool is_bool = false) {
    Operand o; o.constant = v; o.is_float = is_float; o.is_bool = is_bool; return o;
  }
  static Operand symbolic(Expr e) { Operand o; o.sym = std::move(e); return o; }
};

/// One tensor op.
struct TensorOp {
  TensorOpKind kind;
  std::vector<int> inputs;  ///< value ids of the tensor operands, in operand order
  int output = -1;          ///< value id
  int dim = -1;             ///< first reduced dim (non-negative), reductions only
  bool keepdim = false;     ///< reductions only
  std::vector<int64_t> tile_shape;  ///< vec tile shape active when traced
  SourceLoc loc;
  std::vector<Operand> operands;  ///< every operand, tensors and constants, in order
  DataType compute = DataType::FP32;  ///< dtype operands are converted to before computing
  std::vector<int> dims;          ///< reductions: every reduced dim, ascending
  double start = 0.0, step = 1.0; ///< Arange
  RandomParams random;            ///< Random
  int region = -1;                ///< innermost control region, -1 at top level
  std::vector<int64_t> cube_tile; ///< Matmul: the L1 tile sizes m, k, n (L0 sizes in cube_tile_l0);
                                  ///< Attention: query rows, head dim, key block (the score tile is m x n)
  std::vector<int64_t> cube_tile_l0;
  double scale = 1.0;             ///< Attention: the factor applied to q @ kt
  /// Attention with a causal mask (fuse_attention): the mask is -inf wherever key j of query row i
  /// has j - i > causal, so a block of keys past that bound for all of a task's rows is skipped.
  std::optional<Expr> causal;
  /// Conv: kernel height and width, dilations along them (kh, kw, dh, dw); its cube_tile holds the
  /// output channels, input channels per step and output rows of a tile.
  std::vector<int64_t> conv;
  ScatterReduce reduce = ScatterReduce::None;  ///< Scatter: replace, add or multiply
  std::string tile_note;          ///< why a Tensor-level pass changed tile_shape (shown on the op's tile nest)
  /// The matmul whose output tile retile_epilogues gave this op (-1: none): an epilogue over the
  /// buffer budget shrinks with that matmul's cube tile.
  int retiled_from = -1;
  /// The user's op when this one was written for it (a gather for pypto.index_select); messages name it.
  std::string label;
  /// Full: a copy that follows writes every element before anything reads one, so no fill is made
  /// (printed `, covered`).
  bool covered = false;
  bool descending = false;        ///< Sort: largest first (the kept count is the output's last dim)
};

/// A structured control region of the traced program: a loop over a symbolic
/// index, or one branch of a condition. Ops name the innermost region they are in.
struct Region {
  enum class Kind { Loop, Then, Else };
  int id = -1;
  int parent = -1;  ///< enclosing region, -1 at top level
  Kind kind = Kind::Loop;
  std::string var;  ///< Loop: index variable
  Expr start, stop, step;
  Expr cond;        ///< Then/Else: the condition (Else runs where it is false)
  int then_region = -1;  ///< Else: its Then region
};

/// A scalar read from a parameter's memory when the kernel runs (PyPTO's `x[i, j]` on an integer
/// tensor, GetTensorData): variable `var` holds the element of parameter `value` at `index`. The
/// orchestration reads it where region `region` starts (each iteration of a loop), so every task
/// launched in the region, and the bounds of the loops inside it, may use it.
struct ScalarRead {
  std::string var;
  int value = -1;           ///< a parameter's value id (also its memref id at the lower levels)
  std::vector<Expr> index;  ///< one per dim of the parameter
  int region = -1;          ///< innermost control region when traced, -1 at top level
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
  std::vector<Region> regions;        ///< control regions; ops refer to them by id (index)
  std::vector<ScalarRead> reads;      ///< scalars read from parameters, in trace order

  const TensorValue& value(int id) const;
};

/// The chain of regions from the top level down to `region` (outermost first).
std::vector<int> region_path(const std::vector<Region>& regions, int region);

/// Builds a TensorGraph op by op; every factory checks the op's local
/// invariants and raises a user error naming the op, the source location and
/// the expected versus found value.
/// Two dims an op needs equal that tracing cannot compare (a dynamic dim against another
/// size): each call checks them with its dim values.
struct DimCheck {
  Expr a, b;
  std::string what;  ///< the op, its source location and the shapes
};

class TensorGraphBuilder {
 public:
  /// The dim equalities the traced ops assumed, for each call to check.
  const std::vector<DimCheck>& dim_checks() const { return dim_checks_; }
  explicit TensorGraphBuilder(std::string name);

  /// Adds a parameter; returns its value id.
  int add_param(const std::string& name, const std::vector<Expr>& shape, DataType dtype);
  /// Adds an elementwise binary op of two tensors, with broadcasting and type promotion.
  int add_binary(TensorOpKind kind, int a, int b, const std::vector<int64_t>& tile, const SourceLoc& loc);
  /// Adds an elementwise op over operands that are tensors or constants
  /// (binary ops: 2 operands, at least one a tensor; where: cond, a, b).
  int add_elementwise(TensorOpKind kind, const std::vector<Operand>& operands, const std::vector<int64_t>& tile,
                      const SourceLoc& loc);
  /// Adds an elementwise unary op.
  int add_unary(TensorOpKind kind, int x, const std::vector<int64_t>& tile, const SourceLoc& loc);
  /// Adds a conversion to `dtype`.
  int add_cast(int x, DataType dtype, const std::vector<int64_t>& tile, const SourceLoc& loc);
  /// Adds a reduction over `dim` (may be negative).
  int add_reduce(TensorOpKind kind, int x, int dim, bool keepdim, const std::vector<int64_t>& tile,
                 const SourceLoc& loc);
  /// Adds a reduction over several dims at once (each may be negative).
  int add_reduce(TensorOpKind kind, int x, const std::vector<int>& dims, bool keepdim, const std::vector<int64_t>& tile,
                 const SourceLoc& loc);
  /// Adds an inclusive scan (cumsum, cumprod) along `dim` (may be negative); the result has x's shape.
  int add_scan(TensorOpKind kind, int x, int dim, const std::vector<int64_t>& tile, const SourceLoc& loc);
  /// Adds a sort of x's last dim keeping the first `k` positions (DT_INT32), largest first when
  /// `descending`; the dim must be static.
  int add_sort(TensorOpKind kind, int x, int64_t k, bool descending, const std::vector<int64_t>& tile,
               const SourceLoc& loc);
  /// Adds a strided view of `base` (see ViewMap); `valid` may mark a tail.
  int add_view(int base, const std::vector<Expr>& shape, const std::vector<Expr>& offsets, const std::vector<int>& map,
               const std::vector<int64_t>& steps, const std::vector<Expr>& valid, const SourceLoc& loc);
  /// Adds a reshape of `base` to `shape` (same element count).
  int add_reshape(int base, const std::vector<Expr>& shape, const SourceLoc& loc);
  /// Adds `base` read as `dtype` (a bitcast alias, PyPTO's view(x, dtype=)): the same bytes, the last
  /// dim scaled by the ratio of the element sizes (as torch's Tensor.view(dtype)).
  int add_bitcast(int base, DataType dtype, const SourceLoc& loc);
  /// Copies `src` into the view `target` (which must have src's shape); `accumulate`: adds it there
  /// atomically instead (pypto.atomic_add).
  int add_assemble(int src, int target, const std::vector<int64_t>& tile, const SourceLoc& loc, bool accumulate = false);
  /// A new tensor of `shape` filled with `value` in its `valid` part.
  int add_full(const std::vector<Expr>& shape, const Operand& value, DataType dtype, const std::vector<Expr>& valid,
               const std::vector<int64_t>& tile, const SourceLoc& loc);
  /// A new 1-D tensor of `n` elements start + i * step.
  int add_arange(const Expr& n, double start, double step, DataType dtype, const std::vector<int64_t>& tile,
                 const SourceLoc& loc);
  /// A new float tensor of `shape` holding Philox draws of its flattened elements (pypto.uniform,
  /// pypto.normal, pypto.uniform_impl); `label` names the user's op; `block0` (its operand when not 0)
  /// is the counter's low word of element 0's block (a symbolic scalar or a constant, read as uint64).
  int add_random(const std::vector<Expr>& shape, const RandomParams& params, DataType dtype, const std::vector<int64_t>& tile,
                 const std::string& label, const SourceLoc& loc, const Expr& block0 = Expr(0));
  /// Adds a matrix product; `cube` holds the m, k, n L1 tile sizes, `cube_l0` their L0 sizes.
  int add_matmul(int a, int b, DataType out_dtype, const std::vector<int64_t>& cube,
                 const std::vector<int64_t>& cube_l0, const SourceLoc& loc);
  /// A stride-1 2-D convolution (conv2d_tiles) of the padded input `x` [N, Cin, Hp, Wp] and the
  /// weight `w` [Cout, kh kw Cin] (taps outermost); `geometry` is (kh, kw, dh, dw), `tile` (output
  /// channels, input channels per step, output rows). The result [N, Cout, OH, OW] is `out_dtype`.
  int add_conv(int x, int w, DataType out_dtype, const std::vector<int64_t>& geometry, const std::vector<int64_t>& tile,
               const SourceLoc& loc);
  /// out = x gathered along `dim` at `index` (an integer tensor of x's rank). `name` is the
  /// user's op in error messages (an op written with gather, such as index_select).
  int add_gather(int x, int dim, int index, const std::vector<int64_t>& tile, const SourceLoc& loc,
                 const std::string& name = "gather");
  /// Marks the Full op making `value` covered: the caller copies into all of it next.
  void mark_covered(int value);
  /// Writes `src` into `target` along `dim` at `index`; returns `target`. `name` as for add_gather.
  int add_scatter(int target, int dim, int index, int src, ScatterReduce reduce, const std::vector<int64_t>& tile,
                  const SourceLoc& loc, const std::string& name = "scatter");
  /// Opens a loop region: ops added until end_loop run once per index value.
  void begin_loop(const std::string& var, const Expr& start, const Expr& stop, const Expr& step, const SourceLoc& loc);
  void end_loop();
  /// Opens the then-branch of a condition; begin_else switches to the else-branch.
  void begin_if(const Expr& cond, const SourceLoc& loc);
  void begin_else();
  void end_if();
  /// Declares a symbolic dim (its value becomes a scalar argument of the program).
  void add_dyn_dim(const std::string& name);
  /// Reads the element of parameter `value` at `index` when the kernel runs; returns the name of
  /// the variable that holds it (usable wherever a symbolic scalar is: offsets, valid shapes,
  /// loop bounds). The tensor must be an integer parameter the kernel does not write.
  std::string add_read(int value, const std::vector<Expr>& index, const SourceLoc& loc);
  /// Marks the returned values.
  void set_outputs(const std::vector<int>& ids);

  const TensorValue& value(int id) const;
  /// The graph built so far (verified).
  TensorGraph finish() const;

 private:
  /// The reshape op making `shape` of `dtype` an alias of contiguous `base` (add_reshape, add_bitcast).
  int add_reshape_alias(int base, const std::vector<Expr>& shape, DataType dtype, const SourceLoc& loc);
  int new_value(const std::vector<Expr>& shape, DataType dtype);
  /// Appends a creation op (full, arange, random) writing value `id`, in the open region.
  TensorOp& push_create(TensorOpKind kind, int id, const std::vector<int64_t>& tile, const SourceLoc& loc);
  void check_value(int id, const char* op, const SourceLoc& loc) const;
  /// check_value, and a TypeError for a pair type (FP4_E2M1X2, ...), which only moves.
  void check_computed(int id, const char* op, const SourceLoc& loc) const;
  /// The tile an op of rank `rank` uses: the leading `rank` entries of the vec tile shape `tile`, which must
  /// have at least that many (PyPTO's rule); UserError when it is unset, shorter or not positive.
  std::vector<int64_t> fit_tile(const char* op, const std::vector<int64_t>& tile, size_t rank,
                                const SourceLoc& loc) const;
  /// The tile of a copy into a region (assemble), which needs no vec tile shape: `tile`'s leading entries when
  /// it has enough, else a block of up to 8192 elements filled from the last dim.
  std::vector<int64_t> fit_move_tile(const std::vector<int64_t>& tile, const std::vector<Expr>& shape) const;
  int push_region(Region r);
  TensorGraph g_;
  std::vector<int> open_;  ///< open regions, innermost last
  std::vector<DimCheck> dim_checks_;
  /// True when `e` uses only constants and the function's dynamic dims (no loop index).
  bool checkable_per_call(const Expr& e) const;
};

/// Formats a shape as "[64, 1024]".
std::string shape_str(const std::vector<Expr>& shape);
/// Formats an int vector as "[32, 32]".
std::string ints_str(const std::vector<int64_t>& v);

}  // namespace pypto
