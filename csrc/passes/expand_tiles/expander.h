// The Tile Graph builder of pass "expand_tiles", shared by the pass's files:
// expand_tiles.cc (the driver: memrefs, one nest per op), and one file per op
// class in passes/expand_tiles/ (elementwise, reduce, matmul, attention, conv, data).
// Nothing outside the pass includes this header.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ir/errors.h"
#include "ir/program.h"
#include "ir/target.h"
#include "ir/tensor_graph.h"
#include "passes/util.h"

namespace pypto::expand_tiles_impl {

class Expander {
 public:
  Expander(const TensorGraph& g, TileGraph& out, const Target& target) : g_(g), out_(out), target_(target) {}

  void run();

 // The lowerings and the helpers they share (public to the lowering files only: the class is
 // private to the pass).
  int new_tile(std::vector<int64_t> shape, DataType dt) {
    TileDecl t;
    t.id = static_cast<int>(out_.tiles.size());
    t.name = fmt::format("t{}", t.id);
    t.shape = std::move(shape);
    t.dtype = dt;
    out_.tiles.push_back(t);
    return t.id;
  }

  /// Tile extent along a dim: the vec tile size, clamped to a smaller static dim.
  static int64_t clamp(const Expr& dim, int64_t tile) { return clamp_tile(dim, tile); }

  /// Valid extent of the tile starting at `offset` along a dim of size `dim`.
  static Expr valid(const Expr& dim, int64_t tile, const Expr& offset) {
    auto c = dim.as_const();
    if (c && *c % tile == 0) return Expr(tile);
    return min(Expr(tile), dim - offset);
  }

  static Stmt instr(Instr in) { return Stmt{std::move(in)}; }

  /// The loop nest for op `idx`: `order` lists iteration dims outermost first;
  /// dims in `sequential` get non-parallel loops.
  struct Space {
    std::vector<Expr> shape;
    std::vector<int64_t> tile;  // clamped
    std::vector<std::string> vars;
    std::vector<Expr> offset, valid;
  };

  /// The tile iteration over `shape`; tails are cut at `valid_shape`.
  Space make_space(const std::vector<Expr>& shape, const std::vector<int64_t>& tile, int idx,
                   const std::vector<Expr>& valid_shape) {
    Space s;
    s.shape = shape;
    for (size_t d = 0; d < shape.size(); ++d) {
      s.tile.push_back(clamp(shape[d], tile[d]));
      s.vars.push_back(fmt::format("i{}_{}", idx, d));
      Expr off = Expr::var(s.vars.back()) * Expr(s.tile.back());
      s.offset.push_back(off);
      const Expr& lim = valid_shape.empty() ? shape[d] : valid_shape[d];
      // The loop walks the whole shape: when a valid shape cuts it shorter, tiles past the cut
      // are empty even if the cut is a multiple of the tile (valid(...) would call them full).
      const bool cut = !valid_shape.empty() && !valid_shape[d].equals(shape[d]);
      s.valid.push_back(cut ? min(Expr(s.tile.back()), lim - off) : valid(lim, s.tile.back(), off));
    }
    return s;
  }

  Loop make_loop(const Space& s, int d, bool parallel) {
    Loop l;
    l.var = s.vars[d];
    l.start = Expr(0);
    l.stop = ceildiv(s.shape[d], Expr(s.tile[d]));
    l.step = Expr(1);
    l.parallel = parallel;
    l.dim = d;
    l.tile = s.tile[d];
    return l;
  }

  /// A sequential loop `var` over the blocks of `tile` elements of `extent`, from block `start`
  /// (not a dim of the iteration space: the k tiles of a matmul, the key blocks of attention).
  static Loop block_loop(const std::string& var, int64_t start, const Expr& extent, int64_t tile) {
    Loop l;
    l.var = var;
    l.start = Expr(start);
    l.stop = ceildiv(extent, Expr(tile));
    l.step = Expr(1);
    l.dim = -1;
    l.tile = tile;
    return l;
  }

  /// Wraps `body` in loops over `dims` (outermost first).
  std::vector<Stmt> nest(const Space& s, const std::vector<int>& dims, const std::vector<bool>& parallel,
                         std::vector<Stmt> body) {
    for (int i = static_cast<int>(dims.size()) - 1; i >= 0; --i) {
      Loop l = make_loop(s, dims[i], parallel[i]);
      l.body = std::move(body);
      body = {Stmt{std::move(l)}};
    }
    return body;
  }

  /// Loads the tile of value `v` that feeds iteration `s` (right-aligned
  /// broadcasting); returns a tile of the space's rank.
  /// A tile converted to `dt` (TCAST) unless it already has that dtype.
  int convert(int tile, DataType dt, std::vector<Stmt>& body) {
    if (out_.tiles[tile].dtype == dt) return tile;
    Instr c{Opcode::TCAST};
    c.srcs = {tile};
    c.dst = new_tile(out_.tiles[tile].shape, dt);
    body.push_back(instr(c));
    return c.dst;
  }

  /// Loads the tile of value `v` (of the space's rank) at iteration `s`, in its compute type.
  int load_box(int v, const Space& s, std::vector<Stmt>& body) {
    Instr ld{Opcode::TLOAD};
    ld.memref = v;
    ld.offsets = s.offset;
    ld.valid = s.valid;
    ld.dst = new_tile(s.tile, compute_dtype(g_.value(v).dtype));
    body.push_back(instr(ld));
    return ld.dst;
  }

  int load_operand(int v, const Space& s, std::vector<Stmt>& body) {
    const TensorValue& tv = g_.value(v);
    size_t r = s.shape.size(), rv = tv.shape.size();
    std::vector<int64_t> shape;
    Instr ld{Opcode::TLOAD};
    ld.memref = v;
    for (size_t k = 0; k < rv; ++k) {
      size_t d = k + (r - rv);
      auto c = tv.shape[k].as_const();
      bool bcast = c && *c == 1 && !(s.shape[d].as_const() && *s.shape[d].as_const() == 1);
      shape.push_back(bcast ? 1 : s.tile[d]);
      ld.offsets.push_back(bcast ? Expr(0) : s.offset[d]);
      ld.valid.push_back(bcast ? Expr(1) : s.valid[d]);
    }
    ld.dst = new_tile(shape, compute_dtype(tv.dtype));
    body.push_back(instr(ld));
    if (rv == r) return ld.dst;
    std::vector<int64_t> full(r - rv, 1);
    full.insert(full.end(), shape.begin(), shape.end());
    Instr rs{Opcode::TRESHAPE};
    rs.srcs = {ld.dst};
    rs.dst = new_tile(full, compute_dtype(tv.dtype));
    body.push_back(instr(rs));
    return rs.dst;
  }

  /// The instruction computing elementwise op `k` (its op table row's opcode).
  static Opcode plain_opcode(TensorOpKind k) {
    const OpInfo& info = op_info(k);
    if (!info.opcode) throw InternalError(fmt::format("op {} has no elementwise opcode", info.name));
    return *info.opcode;
  }

  /// A low-precision result rounded to its type before it is stored, so a
  /// fused consumer that reads the tile sees what an unfused one would load.
  int round_to_storage(int tile, DataType dt, std::vector<Stmt>& body) {
    // Floats narrower than the type they compute in (FP16, BF16, the FP8 formats) round at every
    // result, so that a fused chain gives what storing each result would.
    if (!dtype_is_float(dt) || compute_dtype(dt) == dt) return tile;
    Instr r{Opcode::TCAST};
    r.srcs = {tile};
    r.dst = new_tile(out_.tiles[tile].shape, out_.tiles[tile].dtype);
    r.round_to = dt;
    body.push_back(instr(r));
    return r.dst;
  }

  /// Stores `tile` into value `v` at `s`'s box; `atomic`: adds it there (pypto.atomic_add).
  void store(int tile, int v, const Space& s, std::vector<Stmt>& body, bool atomic = false) {
    tile = round_to_storage(tile, g_.value(v).dtype, body);
    Instr st{Opcode::TSTORE};
    st.atomic = atomic;
    st.srcs = {tile};
    st.memref = v;
    st.offsets = s.offset;
    st.valid = s.valid;
    body.push_back(instr(st));
  }

  void expand(int idx);

  /// Whether `op`'s tile nest stores every element of its output: an elementwise op, a product or a
  /// reduction at the top level (run once, unconditionally) whose output is valid in whole. Such an
  /// output's memory needs no zero fill.
  bool stores_every_element(const TensorOp& op) const;

  /// The tile of one elementwise op over iteration `s`; returns the result tile.
  int elementwise(const TensorOp& op, const Space& s, DataType result, std::vector<Stmt>& body);

  int expand_to(int src, const std::vector<int64_t>& shape, DataType dt, std::vector<Stmt>& body);

  /// Loads the [.., rows, cols] tile of a matmul operand at the given last-two-dim offsets.
  int load_mm(int v, const Space& s, const Expr& ro, const Expr& rv, int64_t rt, const Expr& co, const Expr& cv,
              int64_t ct, DataType compute, std::vector<Stmt>& body, bool keep_bf16 = false);

  /// TMATMUL of a and b into a new tile of `shape` when `acc` < 0, else TMATMUL_ACC into `acc`;
  /// returns the accumulator. `rows`: the valid rows of a, when they may be fewer than the tile's;
  /// `cols`: the valid columns of b (a product of bf16 operands, which multiplies only those).
  int product(int a, int b, int acc, const std::vector<int64_t>& shape, DataType dt, const std::vector<int64_t>& l0,
              std::vector<Stmt>& body, const Expr* rows = nullptr, bool b_trans = false,
              const Expr* cols = nullptr);

  /// Products of at most this many rows (a decode step) read a transposed b as it lies in memory
  /// (tmatmul ... b_trans).
  static constexpr int64_t kFewRows = 8;
  /// The tensor `v` is a transposed view of, or -1.
  int transposed_base(int v) const;

  /// The L0 cube tile `l0` (m, k, n) as blocks of an (mt, kt, nt) L1 tile: each size is the largest
  /// divisor of the tile's size that is at most the L0 size; none when they equal the tile (one block).
  static std::vector<int64_t> l0_blocks(const std::vector<int64_t>& l0_sizes, int64_t mt, int64_t kt, int64_t nt);

  /// Matmul: the output's tile grid (batch dims one by one, m and n by the
  /// cube tile) in parallel; the k tiles in a sequential loop, the first
  /// through TMATMUL and the rest through TMATMUL_ACC into one accumulator.
  /// `note` gets the batch blocking, when the products are blocked (appended to what is there).
  std::vector<Stmt> matmul(const TensorOp& op, int idx, std::string& note);

  /// Attention (made by fuse_attention): per block of query rows (and batch index), in parallel, an
  /// online softmax over blocks of keys, with the running row max m, row sum l and output
  /// accumulator acc in tiles:
  ///   m = lowest finite float (a fully masked key block leaves it finite), l = 0, acc = 0
  ///   for each key block j:  s = (q * scale) @ kt_j;  mn = max(m, rowmax(s));  alpha = exp(m - mn)
  ///                          m = mn;  p = exp(s - m);  l = l * alpha + rowsum(p)
  ///                          acc = acc * alpha + p @ v_j
  ///   out = acc / l
  /// Key columns past the end of a tail block load as zero scores: the row max and row sum leave them
  /// out through their valid extents, they are clamped to exp(0) so they cannot overflow, and they
  /// meet the zero rows of the tail block of v in the product.
  std::vector<Stmt> attention(const TensorOp& op, int idx);

  /// Conv (conv2d_tiles): per block of output channels and whole output rows, in parallel, a
  /// sequential loop over (tap, channel block) pairs of weight-tile and input-rows loads and an
  /// accumulating matmul (conv.cc).
  std::vector<Stmt> conv(const TensorOp& op, int idx);

  /// A reduction: parallel loops over the kept dims, sequential loops over the reduced ones into an
  /// accumulator tile (reduce.cc).
  std::vector<Stmt> reduce(const TensorOp& op, int idx);

  /// An inclusive scan: parallel loops over the other dims, a sequential loop along the scanned one
  /// carrying the combined tiles before (scan.cc).
  std::vector<Stmt> scan(const TensorOp& op, int idx);

  /// A sort of the last dim, kept whole in one tile (sort.cc).
  std::vector<Stmt> sort(const TensorOp& op, int idx);

  /// Gather and scatter: over the index's shape, the index tiles and the data tensor at the indexed
  /// positions of each block (data.cc).
  std::vector<Stmt> indexed(const TensorOp& op, int idx);

  /// A scatter of whole rows (one index per row along a dim that is not the last: index_add,
  /// index_copy) over the destination's tile grid instead, each block in parallel taking the
  /// indices of its own window from every source block in order (data.cc); nullopt where that form
  /// does not apply.
  std::optional<std::vector<Stmt>> scatter_by_destination(const TensorOp& op, int idx);

  /// The index of each row of the box at `offsets` (valid extents `valid`) of an index seen through
  /// a view that repeats it along the last dim: a tile [..., 1] (data.cc).
  int load_row_index(int index, std::vector<int64_t> tile, std::vector<Expr> offsets, std::vector<Expr> valid,
                     std::vector<Stmt>& body);

  void address_identity_views_by_base();

  /// Assemble (a copy into a view), full and arange: over the written tensor's shape (data.cc).
  std::vector<Stmt> copy_or_fill(const TensorOp& op, int idx);

  const TensorGraph& g_;
  TileGraph& out_;
  const Target& target_;
};


}  // namespace pypto::expand_tiles_impl
