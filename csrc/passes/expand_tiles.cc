// Pass "expand_tiles": Tensor Graph -> Tile Graph.
//
// Requires: a verified Tensor Graph whose ops each carry a vec tile shape of
// the rank of their iteration space.
// Guarantees: one loop nest per tensor op, parallel loops over the op's outer
// tile grid outermost, each iteration loading input tiles (broadcast dims load
// a size-1 tile), computing with PTO tile instructions and storing the output
// tile; tail tiles carry `min(tile, remaining)` valid extents; a reduction
// walks the reduced axis in an inner sequential loop into an accumulator tile
// initialised before it and stored after it.
#include "passes/expand_tiles.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <limits>

#include "ir/errors.h"

namespace pypto {

namespace {

class Expander {
 public:
  Expander(const TensorGraph& g, TileGraph& out) : g_(g), out_(out) {}

  void run() {
    out_.name = g_.name;
    out_.dyn_dims = g_.dyn_dims;
    out_.regions = g_.regions;
    for (const TensorValue& v : g_.values) {
      MemRef m;
      m.id = v.id;
      m.name = v.name;
      m.dtype = v.dtype;
      m.shape = v.shape;
      m.kind = v.view ? MemKind::View : MemKind::Workspace;
      m.view = v.view;
      out_.memrefs.push_back(m);
    }
    for (int p : g_.params) out_.memrefs[p].kind = MemKind::Input;
    std::set<int> seen;
    for (int o : g_.outputs) {
      if (out_.memrefs[o].kind == MemKind::View)
        throw NotSupportedError(fmt::format("function '{}' returns a view of another tensor; not supported yet "
                                            "(return a computed tensor, e.g. x * 1)", g_.name));
      if (out_.memrefs[o].kind == MemKind::Input)
        throw NotSupportedError(fmt::format("function '{}' returns its parameter '{}' unchanged; not supported yet",
                                            g_.name, out_.memrefs[o].name));
      if (!seen.insert(o).second)
        throw NotSupportedError(fmt::format("function '{}' returns the same tensor twice; not supported yet", g_.name));
      out_.memrefs[o].kind = MemKind::Output;
    }
    out_.params = g_.params;
    out_.outputs = g_.outputs;
    for (size_t i = 0; i < g_.ops.size(); ++i) expand(static_cast<int>(i));
  }

 private:
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
  static int64_t clamp(const Expr& dim, int64_t tile) {
    auto c = dim.as_const();
    return (c && *c < tile) ? *c : tile;
  }

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
    if (dt != DataType::FP16 && dt != DataType::BF16) return tile;
    Instr r{Opcode::TCAST};
    r.srcs = {tile};
    r.dst = new_tile(out_.tiles[tile].shape, out_.tiles[tile].dtype);
    r.round_to = dt;
    body.push_back(instr(r));
    return r.dst;
  }

  void store(int tile, int v, const Space& s, std::vector<Stmt>& body) {
    tile = round_to_storage(tile, g_.value(v).dtype, body);
    Instr st{Opcode::TSTORE};
    st.srcs = {tile};
    st.memref = v;
    st.offsets = s.offset;
    st.valid = s.valid;
    body.push_back(instr(st));
  }

  void expand(int idx) {
    const TensorOp& op = g_.ops[idx];
    const OpInfo& info = op_info(op.kind);
    const TensorValue& outv = g_.value(op.output);
    TileNest n;
    n.name = fmt::format("{}_{}", info.name, idx);
    n.source_op = idx;
    n.region = op.region;
    n.note = op.tile_note;
    if (info.cls == OpClass::View) return;  // views move no data
    if (info.cls == OpClass::Matmul) {
      n.body = matmul(op, idx);
    } else if (info.cls == OpClass::Attention) {
      n.body = attention(op, idx);
      // Fused with the key copy, the grid would shrink to the batch dims (one task per head).
      n.alone = true;
      n.note = "alone: one task per block of query rows";
    } else if (info.cls == OpClass::Gather || info.cls == OpClass::Scatter) {
      // Over the index's shape: load index tiles, then read (gather) or write
      // (scatter) the data tensor at the indexed positions of the block.
      bool gather = info.cls == OpClass::Gather;
      int index = gather ? op.inputs[1] : op.inputs[0];
      int data = gather ? op.inputs[0] : op.inputs[2];
      const TensorValue& iv = g_.value(index);
      Space s = make_space(iv.shape, op.tile_shape, idx, iv.valid);
      std::vector<Stmt> body;
      int it = load_operand(index, s, body);
      Instr in{gather ? Opcode::TGATHER : Opcode::TSCATTER};
      in.memref = data;
      in.axis = op.dim;
      in.valid = s.valid;
      for (size_t d = 0; d < s.shape.size(); ++d) in.offsets.push_back(static_cast<int>(d) == op.dim ? Expr(0) : s.offset[d]);
      if (gather) {
        in.srcs = {it};
        in.dst = new_tile(s.tile, compute_dtype(g_.value(data).dtype));
        body.push_back(instr(in));
        store(in.dst, op.output, s, body);
      } else {
        int src = convert(load_operand(op.inputs[1], s, body), compute_dtype(g_.value(data).dtype), body);
        in.srcs = {it, src};
        body.push_back(instr(in));
      }
      std::vector<int> dims;
      for (size_t d = 0; d < s.shape.size(); ++d) dims.push_back(static_cast<int>(d));
      n.body = nest(s, dims, std::vector<bool>(dims.size(), true), std::move(body));
    } else if (info.cls == OpClass::Reduce) {
      n.body = reduce(op, idx);
    } else if (info.cls == OpClass::Assemble || info.cls == OpClass::Create) {
      // Copy src into the target view, or fill a new tensor: over the
      // written tensor's shape, cut at its valid extents.
      const TensorValue& src = g_.value(op.inputs.empty() ? op.output : op.inputs[0]);
      Space s = make_space(src.shape, op.tile_shape, idx, src.valid);
      std::vector<Stmt> body;
      int t;
      if (op.kind == TensorOpKind::Assemble) {
        t = convert(load_operand(op.inputs[0], s, body), compute_dtype(outv.dtype), body);
      } else if (op.kind == TensorOpKind::Full) {
        Instr f{Opcode::TFILL};
        f.dst = new_tile(s.tile, compute_dtype(outv.dtype));
        f.scalar = op.operands.at(0).constant;
        f.scalar_expr = op.operands.at(0).sym;
        body.push_back(instr(f));
        t = f.dst;
      } else {
        Instr a{Opcode::TARANGE};
        a.dst = new_tile(s.tile, compute_dtype(outv.dtype));
        a.scalar = op.start;
        a.step = op.step;
        a.offsets = {s.offset[0]};
        body.push_back(instr(a));
        t = a.dst;
      }
      store(t, op.output, s, body);
      std::vector<int> dims;
      for (size_t d = 0; d < s.shape.size(); ++d) dims.push_back(static_cast<int>(d));
      n.body = nest(s, dims, std::vector<bool>(dims.size(), true), std::move(body));
    } else {
      Space s = make_space(outv.shape, op.tile_shape, idx, outv.valid);
      std::vector<Stmt> body;
      int res = elementwise(op, s, compute_dtype(outv.dtype), body);
      store(res, op.output, s, body);
      std::vector<int> dims;
      for (size_t d = 0; d < s.shape.size(); ++d) dims.push_back(static_cast<int>(d));
      n.body = nest(s, dims, std::vector<bool>(dims.size(), true), std::move(body));
    }
    out_.nests.push_back(std::move(n));
  }

  /// The tile of one elementwise op over iteration `s`; returns the result tile.
  int elementwise(const TensorOp& op, const Space& s, DataType result, std::vector<Stmt>& body) {
    const OpInfo& info = op_info(op.kind);
    if (info.cls == OpClass::Cast) {
      int x = load_operand(op.inputs[0], s, body);
      Instr c{Opcode::TCAST};
      c.srcs = {x};
      c.dst = new_tile(s.tile, result);
      c.round_to = g_.value(op.output).dtype;
      body.push_back(instr(c));
      return c.dst;
    }
    // Load tensor operands, converted to the op's compute dtype (a where's condition stays as it is).
    std::vector<int> tiles;
    Instr in{plain_opcode(op.kind)};
    for (size_t pos = 0; pos < op.operands.size(); ++pos) {
      const Operand& o = op.operands[pos];
      if (!o.is_tensor()) {
        if (in.scalar_pos >= 0)
          throw NotSupportedError(fmt::format("pypto.{} at {}: more than one constant operand is not supported yet",
                                              info.name, op.loc.str()));
        in.scalar_pos = static_cast<int>(pos);
        in.scalar = o.constant;
        in.scalar_expr = o.sym;
        tiles.push_back(-1);
        continue;
      }
      int t = load_operand(o.value, s, body);
      bool is_cond = info.cls == OpClass::Where && pos == 0;
      tiles.push_back(is_cond ? t : convert(t, op.compute, body));
    }
    // A unary test (signbit) computes in its operand's type; its result converts afterwards.
    const bool convert_result = info.cls == OpClass::Unary && op.compute != result;
    in.dst = new_tile(s.tile, convert_result ? op.compute : result);
    // Broadcast operands: the second operand of add/sub/mul/div/maximum may use a
    // row or column expand form; anything else is expanded to the full tile first.
    const auto& te = s.tile;
    size_t r = te.size();
    for (size_t pos = 0; pos < tiles.size(); ++pos) {
      if (tiles[pos] < 0 || out_.tiles[tiles[pos]].shape == te) continue;
      const auto tb = out_.tiles[tiles[pos]].shape;
      bool other_full = tiles.size() == 2 && pos == 1 && tiles[0] >= 0 && out_.tiles[tiles[0]].shape == te;
      if (other_full && in.op == plain_opcode(op.kind)) {
        // The table's row / column expand forms of the op's opcode, where it has them.
        bool row = tb[r - 1] == 1 && te[r - 1] != 1 && std::equal(tb.begin(), tb.end() - 1, te.begin());
        bool col = r == 2 && tb[0] == 1 && te[0] != 1 && tb[1] == te[1];
        auto rowx = opcode_variant(in.op, OpForm::RowExpand), colx = opcode_variant(in.op, OpForm::ColExpand);
        if (row && rowx) {
          in.op = *rowx;
          continue;
        }
        if (col && colx) {
          in.op = *colx;
          continue;
        }
      }
      tiles[pos] = expand_to(tiles[pos], te, out_.tiles[tiles[pos]].dtype, body);
    }
    for (int t : tiles)
      if (t >= 0) in.srcs.push_back(t);
    body.push_back(instr(in));
    return convert_result ? convert(in.dst, result, body) : in.dst;
  }

  int expand_to(int src, const std::vector<int64_t>& shape, DataType dt, std::vector<Stmt>& body) {
    Instr e{Opcode::TEXPAND};
    e.srcs = {src};
    e.dst = new_tile(shape, dt);
    body.push_back(instr(e));
    return e.dst;
  }

  /// Loads the [.., rows, cols] tile of a matmul operand at the given last-two-dim offsets.
  int load_mm(int v, const Space& s, const Expr& ro, const Expr& rv, int64_t rt, const Expr& co, const Expr& cv,
              int64_t ct, DataType compute, std::vector<Stmt>& body) {
    const TensorValue& tv = g_.value(v);
    size_t r = s.shape.size(), rx = tv.shape.size();
    Instr ld{Opcode::TLOAD};
    ld.memref = v;
    std::vector<int64_t> shape;
    for (size_t k = 0; k + 2 < rx; ++k) {
      size_t d = k + (r - rx);
      auto c = tv.shape[k].as_const();
      bool bcast = c && *c == 1 && !(s.shape[d].as_const() && *s.shape[d].as_const() == 1);
      shape.push_back(1);
      ld.offsets.push_back(bcast ? Expr(0) : s.offset[d]);
      ld.valid.push_back(Expr(1));
    }
    shape.push_back(rt);
    shape.push_back(ct);
    ld.offsets.push_back(ro);
    ld.offsets.push_back(co);
    ld.valid.push_back(rv);
    ld.valid.push_back(cv);
    ld.dst = new_tile(shape, compute_dtype(tv.dtype));
    body.push_back(instr(ld));
    return convert(ld.dst, compute, body);
  }

  /// The L0 cube tile `l0` (m, k, n) as blocks of an (mt, kt, nt) L1 tile: each size is the largest
  /// divisor of the tile's size that is at most the L0 size; none when they equal the tile (one block).
  static std::vector<int64_t> l0_blocks(const std::vector<int64_t>& l0_sizes, int64_t mt, int64_t kt, int64_t nt) {
    if (l0_sizes.size() != 3) return {};
    const int64_t tile[] = {mt, kt, nt};
    std::vector<int64_t> l0(3);
    for (int i = 0; i < 3; ++i) {
      int64_t b = std::max<int64_t>(1, std::min(l0_sizes[i], tile[i]));
      while (tile[i] % b != 0) --b;
      l0[i] = b;
    }
    if (l0[0] == mt && l0[1] == kt && l0[2] == nt) return {};
    return l0;
  }

  /// Matmul: the output's tile grid (batch dims one by one, m and n by the
  /// cube tile) in parallel; the k tiles in a sequential loop, the first
  /// through TMATMUL and the rest through TMATMUL_ACC into one accumulator.
  std::vector<Stmt> matmul(const TensorOp& op, int idx) {
    const TensorValue& outv = g_.value(op.output);
    const TensorValue& av = g_.value(op.inputs[0]);
    size_t r = outv.shape.size();
    std::vector<int64_t> tile(r, 1);
    tile[r - 2] = op.cube_tile[0];
    tile[r - 1] = op.cube_tile[2];
    Space s = make_space(outv.shape, tile, idx, outv.valid);
    const Expr& K = av.shape.back();
    const Expr& Kvalid = av.valid.back();
    int64_t kt = clamp(K, op.cube_tile[1]);
    std::string kvar = fmt::format("k{}", idx);
    auto k_off = [&](const Expr& kk) { return kk * Expr(kt); };
    auto k_valid = [&](const Expr& kk) { return valid(Kvalid, kt, k_off(kk)); };
    int64_t mt = s.tile[r - 2], nt = s.tile[r - 1];
    DataType acc_dt = op.compute;
    auto step = [&](const Expr& kk, int acc, std::vector<Stmt>& body) {
      int a = load_mm(op.inputs[0], s, s.offset[r - 2], s.valid[r - 2], mt, k_off(kk), k_valid(kk), kt, acc_dt, body);
      int b = load_mm(op.inputs[1], s, k_off(kk), k_valid(kk), kt, s.offset[r - 1], s.valid[r - 1], nt, acc_dt, body);
      Instr mm{acc < 0 ? Opcode::TMATMUL : Opcode::TMATMUL_ACC};
      mm.l0 = l0_blocks(op.cube_tile_l0, mt, kt, nt);
      if (acc < 0) {
        std::vector<int64_t> shape(r, 1);
        shape[r - 2] = mt;
        shape[r - 1] = nt;
        mm.dst = new_tile(shape, acc_dt);
        mm.srcs = {a, b};
      } else {
        mm.dst = acc;
        mm.srcs = {acc, a, b};
      }
      body.push_back(instr(mm));
      return mm.dst;
    };
    std::vector<Stmt> body;
    int acc = step(Expr(0), -1, body);
    Loop kl = block_loop(kvar, 1, K, kt);
    step(Expr::var(kvar), acc, kl.body);
    if (!(kl.stop.as_const() && *kl.stop.as_const() <= 1)) body.push_back(Stmt{std::move(kl)});
    int res = convert(acc, compute_dtype(outv.dtype), body);
    store(res, op.output, s, body);
    std::vector<int> dims;
    for (size_t d = 0; d < r; ++d) dims.push_back(static_cast<int>(d));
    return nest(s, dims, std::vector<bool>(dims.size(), true), std::move(body));
  }

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
  std::vector<Stmt> attention(const TensorOp& op, int idx) {
    const TensorValue& outv = g_.value(op.output);
    const TensorValue& ktv = g_.value(op.inputs[1]);
    size_t r = outv.shape.size();
    auto d_const = ktv.shape[r - 2].as_const(), dv_const = outv.shape[r - 1].as_const();
    if (!d_const || !dv_const) throw InternalError("attention with a symbolic head size");
    int64_t d = *d_const, dv = *dv_const;
    auto shape2 = [&](int64_t rows, int64_t cols) {
      std::vector<int64_t> v(r, 1);
      v[r - 2] = rows;
      v[r - 1] = cols;
      return v;
    };
    Space s = make_space(outv.shape, shape2(op.cube_tile[0], dv), idx, outv.valid);
    const Expr& T = ktv.shape[r - 1];
    int64_t br = s.tile[r - 2], bc = clamp(T, op.cube_tile[2]);
    const DataType f32 = DataType::FP32;
    std::string jvar = fmt::format("j{}", idx);
    Expr joff = Expr::var(jvar) * Expr(bc);
    Expr jvalid = valid(T, bc, joff);
    std::vector<Expr> score_valid(r, Expr(1));
    score_valid[r - 2] = s.valid[r - 2];
    score_valid[r - 1] = jvalid;
    auto emit = [&](Opcode opc, std::vector<int> srcs, int dst, std::vector<Stmt>& body) {
      Instr in{opc};
      in.srcs = std::move(srcs);
      in.dst = dst;
      if (is_reduction(opc)) in.valid = score_valid;
      body.push_back(instr(in));
      return dst;
    };
    auto fill = [&](int tile, double value, std::vector<Stmt>& body) {
      Instr f{Opcode::TFILL};
      f.dst = tile;
      f.scalar = value;
      body.push_back(instr(f));
      return tile;
    };
    auto with_scalar = [&](Opcode opc, int src, int dst, double value, std::vector<Stmt>& body) {
      Instr in{opc};
      in.srcs = {src};
      in.dst = dst;
      in.scalar = value;
      in.scalar_pos = 1;
      body.push_back(instr(in));
    };
    std::vector<Stmt> body;
    int q = load_mm(op.inputs[0], s, s.offset[r - 2], s.valid[r - 2], br, Expr(0), Expr(d), d, f32, body);
    if (op.scale != 1.0) {  // q * scale once per row block instead of every score
      int scaled = new_tile(shape2(br, d), f32);
      with_scalar(Opcode::TMUL, q, scaled, op.scale, body);
      q = scaled;
    }
    // The running max starts at the lowest finite float, not -inf: a row whose first key blocks are
    // all masked (-inf scores) keeps m finite, so alpha = exp(m - mn) and p = exp(s - m) are 1 and
    // 0 instead of exp(-inf + inf) = NaN.
    int m = fill(new_tile(shape2(br, 1), f32), -static_cast<double>(std::numeric_limits<float>::max()), body);
    int l = fill(new_tile(shape2(br, 1), f32), 0.0, body);
    int acc = fill(new_tile(shape2(br, dv), f32), 0.0, body);

    std::vector<Stmt> jb;
    int kt = load_mm(op.inputs[1], s, Expr(0), Expr(d), d, joff, jvalid, bc, f32, jb);
    Instr qk{Opcode::TMATMUL};
    qk.srcs = {q, kt};
    qk.dst = new_tile(shape2(br, bc), f32);
    qk.l0 = l0_blocks(op.cube_tile_l0, br, d, bc);
    jb.push_back(instr(qk));
    int scores = qk.dst;
    int rmax = emit(Opcode::TROWMAX, {scores}, new_tile(shape2(br, 1), f32), jb);
    int mn = emit(Opcode::TMAX, {m, rmax}, new_tile(shape2(br, 1), f32), jb);
    int alpha = emit(Opcode::TSUB, {m, mn}, new_tile(shape2(br, 1), f32), jb);
    emit(Opcode::TEXP, {alpha}, alpha, jb);
    emit(Opcode::TMAX, {m, rmax}, m, jb);  // m = mn: a [rows, 1] max costs what a copy would
    emit(Opcode::TMUL, {l, alpha}, l, jb);
    int p = emit(Opcode::TROWEXPANDSUB, {scores, m}, new_tile(shape2(br, bc), f32), jb);
    if (!jvalid.as_const()) with_scalar(Opcode::TMIN, p, p, 0.0, jb);
    emit(Opcode::TEXP, {p}, p, jb);
    int rsum = emit(Opcode::TROWSUM, {p}, new_tile(shape2(br, 1), f32), jb);
    emit(Opcode::TADD, {l, rsum}, l, jb);
    emit(Opcode::TROWEXPANDMUL, {acc, alpha}, acc, jb);
    int vt = load_mm(op.inputs[2], s, joff, jvalid, bc, Expr(0), Expr(dv), dv, f32, jb);
    Instr pv{Opcode::TMATMUL_ACC};
    pv.srcs = {acc, p, vt};
    pv.dst = acc;
    const std::vector<int64_t>& l0 = op.cube_tile_l0;
    pv.l0 = l0.size() == 3 ? l0_blocks({l0[0], l0[2], l0[1]}, br, bc, dv) : std::vector<int64_t>{};
    jb.push_back(instr(pv));
    Loop jl = block_loop(jvar, 0, T, bc);
    jl.body = std::move(jb);
    body.push_back(Stmt{std::move(jl)});
    int res = emit(Opcode::TROWEXPANDDIV, {acc, l}, new_tile(shape2(br, dv), f32), body);
    res = convert(res, compute_dtype(outv.dtype), body);
    store(res, op.output, s, body);
    std::vector<int> dims;
    for (size_t i = 0; i < r; ++i) dims.push_back(static_cast<int>(i));
    return nest(s, dims, std::vector<bool>(dims.size(), true), std::move(body));
  }

  std::vector<Stmt> reduce(const TensorOp& op, int idx) {
    const TensorValue& inv = g_.value(op.inputs[0]);
    const TensorValue& outv = g_.value(op.output);
    Space s = make_space(inv.shape, op.tile_shape, idx, inv.valid);
    int k = op.dim;
    int r = static_cast<int>(inv.shape.size());
    // Per reduction (from the op table): the binary opcode combining partial results, its row,
    // column and middle-axis reductions, and the accumulator's start value (+-inf stand for the
    // type's highest/lowest value).
    struct Red {
      Opcode row, col, mid, combine;
      double init;
    };
    const double inf = std::numeric_limits<double>::infinity();
    const Opcode combine = plain_opcode(op.kind);
    auto variant = [&](OpForm f) {
      auto v = opcode_variant(combine, f);
      if (!v) throw InternalError(fmt::format("reduction {} has no {} opcode", opcode_name(combine), form_name(f)));
      return *v;
    };
    double init = 0.0;
    switch (opcode_info(combine).identity) {
      case Identity::Zero: init = 0.0; break;
      case Identity::One: init = 1.0; break;
      case Identity::Lowest: init = -inf; break;
      case Identity::Highest: init = inf; break;
      case Identity::None: throw InternalError(fmt::format("{} has no identity to start a reduction", opcode_name(combine)));
    }
    const Red red_info{variant(OpForm::RowReduce), variant(OpForm::ColReduce), variant(OpForm::AxisReduce), combine, init};
    std::vector<int> red_dims = op.dims.empty() ? std::vector<int>{k} : op.dims;
    auto is_red = [&](int d) { return std::find(red_dims.begin(), red_dims.end(), d) != red_dims.end(); };
    std::vector<int64_t> acc_shape = s.tile;
    for (int d : red_dims) acc_shape[d] = 1;
    DataType acc_dt = op.compute;
    int acc = new_tile(acc_shape, acc_dt);
    Instr fill{Opcode::TFILL};
    fill.dst = acc;
    fill.scalar = red_info.init;

    std::vector<Stmt> inner;
    Instr ld{Opcode::TLOAD};
    ld.memref = op.inputs[0];
    ld.offsets = s.offset;
    ld.valid = s.valid;
    ld.dst = new_tile(s.tile, compute_dtype(inv.dtype));
    inner.push_back(instr(ld));
    int cur = convert(ld.dst, acc_dt, inner);
    // Reduce the tile one axis at a time, last axis first.
    std::vector<int64_t> cur_shape = s.tile;
    std::vector<Expr> cur_valid = s.valid;
    for (auto it = red_dims.rbegin(); it != red_dims.rend(); ++it) {
      int d = *it;
      Opcode red = d == r - 1 ? red_info.row : d == 0 ? red_info.col : red_info.mid;
      Instr rd{red};
      rd.srcs = {cur};
      rd.valid = cur_valid;
      if (red == red_info.mid) rd.axis = d;
      cur_shape[d] = 1;
      cur_valid[d] = Expr(1);
      rd.dst = new_tile(cur_shape, acc_dt);
      inner.push_back(instr(rd));
      cur = rd.dst;
    }
    Instr comb{red_info.combine};
    comb.srcs = {acc, cur};
    comb.dst = acc;
    inner.push_back(instr(comb));
    // Sequential loops over the reduced dims, innermost the last.
    std::vector<Stmt> loops = std::move(inner);
    for (auto it = red_dims.rbegin(); it != red_dims.rend(); ++it) {
      Loop l = make_loop(s, *it, false);
      l.body = std::move(loops);
      loops = {Stmt{std::move(l)}};
    }

    // Store the accumulator: keepdim keeps the size-1 dims, otherwise reshape them away.
    std::vector<Stmt> body;
    body.push_back(instr(fill));
    body.insert(body.end(), loops.begin(), loops.end());
    Instr st{Opcode::TSTORE};
    st.memref = op.output;
    int stored = acc;
    for (int d = 0; d < r; ++d) {
      if (is_red(d) && !op.keepdim) continue;
      st.offsets.push_back(is_red(d) ? Expr(0) : s.offset[d]);
      st.valid.push_back(is_red(d) ? Expr(1) : s.valid[d]);
    }
    if (!op.keepdim) {
      std::vector<int64_t> shape;
      for (int d = 0; d < r; ++d)
        if (!is_red(d)) shape.push_back(acc_shape[d]);
      Instr rs{Opcode::TRESHAPE};
      rs.srcs = {acc};
      rs.dst = new_tile(shape, acc_dt);
      body.push_back(instr(rs));
      stored = rs.dst;
    }
    stored = convert(stored, compute_dtype(outv.dtype), body);
    stored = round_to_storage(stored, outv.dtype, body);
    st.srcs = {stored};
    body.push_back(instr(st));

    std::vector<int> dims;
    for (int d = 0; d < r; ++d)
      if (!is_red(d)) dims.push_back(d);
    return nest(s, dims, std::vector<bool>(dims.size(), true), std::move(body));
  }

  const TensorGraph& g_;
  TileGraph& out_;
};

}  // namespace

TileGraph ExpandTiles(const TensorGraph& g, const PassOptions&) {
  TileGraph out;
  Expander(g, out).run();
  return out;
}

}  // namespace pypto
