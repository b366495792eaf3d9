/// Levels 2-4: the Tile, Block and Execution graphs. They share one statement
/// language (PTO tile instructions, FOR loops and CALLs over symbolic integer
/// expressions); each level restricts where each statement may appear, and the
/// verifier checks those rules.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "ir/dtype.h"
#include "ir/expr.h"
#include "ir/op_table.h"
#include "ir/tensor_graph.h"

namespace pypto {

/// Where a memref lives.
enum class MemKind {
  Input,      ///< parameter of the traced function (global memory)
  Output,     ///< returned value (global memory)
  Workspace,  ///< intermediate in global memory, allocated per run
  Local,      ///< intermediate kept in an InCore function's tile buffers
  View,       ///< an alias of another memref's memory (see MemRef::view)
};
const char* memkind_name(MemKind k);

/// A tensor in memory.
struct MemRef {
  int id = -1;
  std::string name;
  DataType dtype = DataType::FP32;
  std::vector<Expr> shape;
  MemKind kind = MemKind::Workspace;
  std::optional<ViewMap> view;  ///< View memrefs: how they address `view->base`
  /// Workspaces: allocated zero-filled; false (printed `alloc_workspace uninit`) when every element
  /// is written before it is read (the tensor of a covered fill, or the output of an op whose tile
  /// nest stores every element: expand_tiles), so the runtime skips the zeroing.
  bool zeroed = true;
};

/// A tile buffer declaration (`alloc_tile`).
struct TileDecl {
  int id = -1;
  std::string name;
  std::vector<int64_t> shape;
  DataType dtype = DataType::FP32;
};

/// One PTO tile instruction.
struct Instr {
  Opcode op;
  int dst = -1;              ///< destination tile (not TSTORE)
  std::vector<int> srcs;     ///< source tiles
  int memref = -1;           ///< TLOAD/TSTORE only
  std::vector<Expr> offsets; ///< TLOAD/TSTORE: element offset per memref dim
  std::vector<Expr> valid;   ///< valid extent per tile dim (tails); TLOAD/TSTORE and reductions
  double scalar = 0.0;       ///< TFILL value, or the constant operand (see scalar_pos)
  int scalar_pos = -1;       ///< operand position the constant takes (-1: no constant operand)
  std::optional<Expr> scalar_expr;  ///< symbolic constant operand (instead of `scalar`)
  int axis = -1;             ///< TRED*: the reduced tile axis
  std::optional<DataType> round_to;  ///< TCAST: storage type the value is rounded through
  double step = 1.0;         ///< TARANGE
  RandomParams random;       ///< TRANDOM: offsets are [position, row strides..., block base] (see the printer)
  /// TMATMUL*: the L0 cube tile (m, k, n) that blocks the product inside the tile; empty: the whole
  /// tile is one block. Printed as ` l0 [m, k, n]`.
  std::vector<int64_t> l0;
  /// TMATMUL*: b is the [N, K] tile and the product reads it transposed (a weight stored [out, in],
  /// multiplied by few rows: dot products along K, no transposing copy). Printed ` b_trans`.
  bool b_trans = false;
  ScatterReduce reduce = ScatterReduce::None;  ///< TSCATTER: how a value meets the one it lands on
  /// TSCATTER, destination-blocked (pass expand_tiles): empty, or {base, bound}. The box on `axis`
  /// is then a window of the destination: its first position (offsets[axis]) takes index `base`,
  /// and it spans the values tile's extent on `axis` (cut at the memref's end). Indices must lie in
  /// [0, bound); those outside the window are skipped (another task's window takes them). Without
  /// it, offsets[axis] is 0 and every index lands. Printed ` window=[base, bound]`.
  std::vector<Expr> window;
  /// TLOAD (pass plan_view_loads): the tile may point into the source memory instead of copying it,
  /// where the box lies there densely. Printed ` view`.
  bool view = false;
  /// TLOAD view (pass plan_view_loads): the box need only be dense along its rows: the tile may
  /// point at the source with the source's row pitch, which its readers take (only the operands of
  /// bf16 matmuls, the bf16 dot-product kernels, read a tile so). Printed ` view strided`.
  bool strided = false;
  /// TLOAD and TMATMUL* (pass plan_matmul_panels): 0, or the width of the column panels the tile is
  /// laid out in: a TLOAD writes its [rows, cols] tile as cols / panels panels, each holding its
  /// columns of every row one row after another; a TMATMUL reads its b operand laid out so. Printed
  /// ` panels=W`.
  int64_t panels = 0;
  /// TSTORE (pass stream_stores): written with streaming stores past the caches. Printed ` stream`.
  bool stream = false;
  /// TSTORE (pypto.atomic_add): adds the tile into the memory box element by element, each addition
  /// atomic, instead of overwriting it. Printed ` atomic_add`.
  bool atomic = false;
};

/// Tile sources an instruction reads (its opcode's arity less a constant operand).
int instr_num_srcs(const Instr& in);
/// Instructions that read a memref (TLOAD, TGATHER) or write one (TSTORE, TSCATTER).
bool reads_memory(Opcode op);
bool writes_memory(Opcode op);
/// The tile whose shape is the box a memory instruction touches.
int memory_tile(const Instr& in);
/// Whether `in` reads its source `i` as the a or b operand of a product of two bf16 tiles (`dtype`
/// gives a tile's dtype): the only reads that take a strided view's row pitch (tload ... view strided).
bool reads_with_row_pitch(const Instr& in, size_t i, const std::function<DataType(int)>& dtype);

struct Stmt;
struct NamedCall;

/// Binary expansion of a dynamic orchestration loop (see the binary_expand
/// pass): power-of-two blocks from `max_range` down to `min_range` plus a
/// residual loop; `tile_levels` maps a block size to the tile rows its calls
/// use (key 0: the residual's, the base), picking function variants
/// `<callee>_<rows>` and scaling the iteration count and offsets.
struct LoopRange {
  int64_t max_range = 0;
  int64_t min_range = 0;
  std::map<int64_t, int64_t> tile_levels;
};

/// A counted loop. Parallel loops iterate the outer tile grid of an op.
struct Loop {
  std::string var;
  Expr start, stop, step;
  std::vector<Stmt> body;
  bool parallel = false;
  int dim = -1;        ///< iteration-space dim the loop walks (-1 if none)
  int64_t tile = 0;    ///< elements per iteration along `dim`
  std::optional<LoopRange> range;  ///< orchestration loops only: binary expansion
};

/// A region argument of a CALL: `memref[offsets; extents]`.
struct CallArg {
  int memref = -1;
  std::vector<Expr> offsets;
  std::vector<Expr> extents;
};

/// Orchestration: run InCore function `callee` as one task.
struct Call {
  int callee = -1;
  std::vector<CallArg> args;    ///< one per region parameter of the callee
  std::vector<Expr> scalars;    ///< one per scalar parameter of the callee
  /// Set only in the tile-level API's modules before linking (ir/pto_module.h):
  /// the callee and arguments by name; `callee`, `args` and `scalars` are then unused.
  std::shared_ptr<const NamedCall> named;
};

/// Orchestration: run `then_body` where `cond` is non-zero, else `else_body`.
struct IfThen {
  Expr cond;
  std::vector<Stmt> then_body, else_body;
};

/// What an instruction of a Fused run does in the run's strip loop.
enum class FuseRole {
  Before,  ///< a load or reshape run once, ahead of the loop
  Alias,   ///< a reshape the loop reads through its source (it does not run)
  Chain,   ///< elementwise: runs strip by strip inside the loop, in registers or strip arrays
  RowSum,  ///< a row sum of a chain value, accumulated inside the loop
  Store,   ///< a store of a chain value, written strip by strip
};

/// InCore functions, Block level on (pass fuse_chains): a run of instructions that executes as one
/// strip-mined loop over `rows` x `cols` elements, each strip of `strip` elements going through
/// every chain instruction before the next strip starts. `body` holds the run's instructions in
/// program order; what they compute is what the same instructions compute unfused.
struct Fused {
  std::vector<Stmt> body;      ///< instructions only
  int64_t rows = 1;            ///< rows of the loop (1: the tiles are walked as one flat row)
  int64_t cols = 0;            ///< elements per row
  int64_t strip = 0;           ///< elements per strip; divides `cols`
  std::vector<int> registers;  ///< chain tiles whose values never reach their buffers
  std::vector<int> aliases;    ///< reshaped tiles read through their sources (role Alias)
  /// Chain tiles computed by their opcode's fast form (pass fast_forms): a strip with an element
  /// outside a fast form's domain is evaluated again with the full forms.
  std::vector<int> fast;
};

/// The role of instruction `in` (one of `f.body`'s) in its run.
FuseRole fuse_role(const Fused& f, const Instr& in);

/// Orchestration: `var` := the element of `memref` (an entry tensor) at `index`, read when the
/// statement runs; later statements of the enclosing body may use `var`.
struct ReadScalar {
  std::string var;
  int memref = -1;
  std::vector<Expr> index;
};

/// A statement: an instruction, a loop, a call, a condition, a fused run or a scalar read.
struct Stmt {
  std::variant<Instr, Loop, Call, IfThen, Fused, ReadScalar> node;
};

/// True when `body` stores into `memref` and every access of it there is an atomic TSTORE: what
/// makes a function's parameter an accumulator (RegionParam::accumulate).
bool accumulates_only(const std::vector<Stmt>& body, int memref);

/// Level 2: every tensor op expanded into a loop nest over tiles.
struct TileNest {
  std::string name;   ///< e.g. "amax_0"
  int source_op = -1; ///< index into the Tensor Graph's ops
  int region = -1;    ///< innermost control region (TensorGraph::regions)
  std::string note;   ///< a tiling decision worth showing (e.g. retiled to fuse with a matmul)
  bool alone = false; ///< fuse_blocks gives it an InCore function of its own (attention: its query blocks are its tasks)
  std::vector<Stmt> body;  ///< the loop nest (parallel loops outermost)
};

struct TileGraph {
  std::string name;
  std::vector<MemRef> memrefs;  ///< one per tensor value, in value order
  std::vector<TileDecl> tiles;
  std::vector<TileNest> nests;
  std::vector<int> params, outputs;  ///< memref ids
  std::vector<std::string> dyn_dims;
  std::vector<Region> regions;
  std::vector<ScalarRead> reads;  ///< value ids are memref ids
};

/// A region parameter of an InCore function.
struct RegionParam {
  std::string name;
  int memref = -1;               ///< the global memref it binds in the caller
  DataType dtype = DataType::FP32;
  std::vector<Expr> max_extents; ///< largest box the function is called with
  bool is_output = false;
  /// An output the function only adds into with atomic stores and never reads (see
  /// `accumulates_only`): calls passing it are not ordered against each other, only against the
  /// tensor's plain reads and writes. Implies is_output; printed ` accum` (instead of ` out`).
  bool accumulate = false;
};

/// An InCore function: a fused chain of tile loop nests over one block of the
/// outer tile grid; intermediates live in local buffers and tiles.
struct InCoreFunction {
  std::string name;
  std::vector<RegionParam> params;
  std::vector<std::string> scalar_params;  ///< block indices, then symbolic dims
  std::vector<int> locals;                 ///< ids of Local memrefs it owns
  std::vector<TileDecl> tiles;
  std::vector<Stmt> body;                  ///< offsets relative to each region's origin
  std::vector<std::string> fused_ops;      ///< tile nests fused into it, in order
  std::vector<int> source_ops;             ///< Tensor Graph op of each fused nest
  int64_t buffer_bytes = 0;                ///< arena bytes after buffer reuse (set by plan_buffers)
  std::map<int, int64_t> tile_offsets;     ///< tile id -> arena offset (set by plan_buffers)
  std::map<int, int64_t> local_offsets;    ///< static local memref id -> arena offset
};

/// One group of the Block Graph: an InCore function and the grid it runs over.
struct BlockLaunch {
  int function = -1;
  std::vector<Loop> grid;  ///< parallel loops (empty bodies), outermost first
  Call call;               ///< the call made inside the grid
  int region = -1;         ///< innermost control region
};

/// Level 3: InCore functions and where they run.
struct BlockGraph {
  std::string name;
  std::vector<MemRef> memrefs;
  std::vector<InCoreFunction> functions;
  std::vector<BlockLaunch> launches;  ///< in execution order
  std::vector<int> params, outputs;
  std::vector<std::string> dyn_dims;
  std::vector<Region> regions;
  std::vector<ScalarRead> reads;
};

/// Level 4: the orchestration program.
struct ExecutionGraph {
  std::string name;
  std::string module;  ///< the PTO module's name (empty: the same as `name`)
  std::vector<MemRef> memrefs;
  std::vector<InCoreFunction> functions;
  std::vector<Stmt> orchestration;  ///< loops and calls only
  std::vector<int> params, outputs;
  std::vector<std::string> dyn_dims;  ///< scalar parameters of the orchestration, in order
  std::map<std::string, DataType> scalar_dtypes;  ///< declared type of a scalar (absent: i64)
};

/// Calls `fn` on every instruction in `body`, inside loops, fused runs and both branches of
/// conditions, in program order.
void for_each_instr(const std::vector<Stmt>& body, const std::function<void(const Instr&)>& fn);
/// Mutable form of for_each_instr.
void for_each_instr(std::vector<Stmt>& body, const std::function<void(Instr&)>& fn);

/// Elements of a constant shape.
int64_t numel(const std::vector<int64_t>& shape);
/// Bytes of one tile buffer, rounded up to the 64-byte alignment codegen gives it.
int64_t tile_bytes(const TileDecl& t);
/// Bytes of one local buffer (its shape must be static), rounded up to 64.
int64_t local_bytes(const MemRef& m);
/// True when a local buffer's size is only known at run time (a symbolic dim).
bool local_is_dynamic(const MemRef& m);

}  // namespace pypto
