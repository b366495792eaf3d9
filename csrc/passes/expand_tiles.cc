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
    for (const TensorValue& v : g_.values) {
      MemRef m;
      m.id = v.id;
      m.name = v.name;
      m.dtype = v.dtype;
      m.shape = v.shape;
      m.kind = MemKind::Workspace;
      out_.memrefs.push_back(m);
    }
    for (int p : g_.params) out_.memrefs[p].kind = MemKind::Input;
    std::set<int> seen;
    for (int o : g_.outputs) {
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

  Space make_space(const std::vector<Expr>& shape, const std::vector<int64_t>& tile, int idx) {
    Space s;
    s.shape = shape;
    for (size_t d = 0; d < shape.size(); ++d) {
      s.tile.push_back(clamp(shape[d], tile[d]));
      s.vars.push_back(fmt::format("i{}_{}", idx, d));
      Expr off = Expr::var(s.vars.back()) * Expr(s.tile.back());
      s.offset.push_back(off);
      s.valid.push_back(valid(shape[d], s.tile.back(), off));
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
    ld.dst = new_tile(shape, tv.dtype);
    body.push_back(instr(ld));
    if (rv == r) return ld.dst;
    std::vector<int64_t> full(r - rv, 1);
    full.insert(full.end(), shape.begin(), shape.end());
    Instr rs{Opcode::TRESHAPE};
    rs.srcs = {ld.dst};
    rs.dst = new_tile(full, tv.dtype);
    body.push_back(instr(rs));
    return rs.dst;
  }

  static Opcode plain_opcode(TensorOpKind k) {
    switch (k) {
      case TensorOpKind::Add: return Opcode::TADD;
      case TensorOpKind::Sub: return Opcode::TSUB;
      case TensorOpKind::Mul: return Opcode::TMUL;
      case TensorOpKind::Div: return Opcode::TDIV;
      case TensorOpKind::Max: return Opcode::TMAX;
      case TensorOpKind::Exp: return Opcode::TEXP;
      default: throw InternalError("no elementwise opcode for this op");
    }
  }

  static Opcode rowexpand_opcode(TensorOpKind k) {
    switch (k) {
      case TensorOpKind::Add: return Opcode::TROWEXPANDADD;
      case TensorOpKind::Sub: return Opcode::TROWEXPANDSUB;
      case TensorOpKind::Mul: return Opcode::TROWEXPANDMUL;
      case TensorOpKind::Div: return Opcode::TROWEXPANDDIV;
      case TensorOpKind::Max: return Opcode::TROWEXPANDMAX;
      default: throw InternalError("no row-expand opcode for this op");
    }
  }

  static Opcode colexpand_opcode(TensorOpKind k) {
    switch (k) {
      case TensorOpKind::Add: return Opcode::TCOLEXPANDADD;
      case TensorOpKind::Sub: return Opcode::TCOLEXPANDSUB;
      case TensorOpKind::Mul: return Opcode::TCOLEXPANDMUL;
      case TensorOpKind::Div: return Opcode::TCOLEXPANDDIV;
      case TensorOpKind::Max: return Opcode::TCOLEXPANDMAX;
      default: throw InternalError("no col-expand opcode for this op");
    }
  }

  void store(int tile, int v, const Space& s, std::vector<Stmt>& body) {
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
    if (info.cls == OpClass::Reduce) {
      n.body = reduce(op, idx);
    } else {
      Space s = make_space(outv.shape, op.tile_shape, idx);
      std::vector<Stmt> body;
      int a = load_operand(op.inputs[0], s, body);
      int res;
      if (info.cls == OpClass::Unary) {
        Instr in{plain_opcode(op.kind)};
        in.srcs = {a};
        in.dst = new_tile(s.tile, outv.dtype);
        body.push_back(instr(in));
        res = in.dst;
      } else {
        int b = load_operand(op.inputs[1], s, body);
        res = binary(op.kind, a, b, s, outv.dtype, body);
      }
      store(res, op.output, s, body);
      std::vector<int> dims;
      for (size_t d = 0; d < s.shape.size(); ++d) dims.push_back(static_cast<int>(d));
      n.body = nest(s, dims, std::vector<bool>(dims.size(), true), std::move(body));
    }
    out_.nests.push_back(std::move(n));
  }

  int binary(TensorOpKind kind, int a, int b, const Space& s, DataType dt, std::vector<Stmt>& body) {
    const auto& ta = out_.tiles[a].shape;
    const auto& tb = out_.tiles[b].shape;
    const auto& te = s.tile;
    size_t r = te.size();
    Instr in{plain_opcode(kind)};
    in.dst = new_tile(te, dt);
    if (ta == te && tb != te) {
      bool row = tb[r - 1] == 1 && te[r - 1] != 1 && std::equal(tb.begin(), tb.end() - 1, te.begin());
      bool col = r == 2 && tb[0] == 1 && te[0] != 1 && tb[1] == te[1];
      if (row) in.op = rowexpand_opcode(kind);
      else if (col) in.op = colexpand_opcode(kind);
      else b = expand_to(b, te, dt, body);
    } else if (ta != te) {
      a = expand_to(a, te, dt, body);
      if (tb != te) b = expand_to(b, te, dt, body);
    }
    in.srcs = {a, b};
    body.push_back(instr(in));
    return in.dst;
  }

  int expand_to(int src, const std::vector<int64_t>& shape, DataType dt, std::vector<Stmt>& body) {
    Instr e{Opcode::TEXPAND};
    e.srcs = {src};
    e.dst = new_tile(shape, dt);
    body.push_back(instr(e));
    return e.dst;
  }

  std::vector<Stmt> reduce(const TensorOp& op, int idx) {
    const TensorValue& inv = g_.value(op.inputs[0]);
    const TensorValue& outv = g_.value(op.output);
    Space s = make_space(inv.shape, op.tile_shape, idx);
    int k = op.dim;
    int r = static_cast<int>(inv.shape.size());
    bool is_sum = op.kind == TensorOpKind::Sum;
    Opcode red;
    if (k == r - 1) red = is_sum ? Opcode::TROWSUM : Opcode::TROWMAX;
    else if (k == 0) red = is_sum ? Opcode::TCOLSUM : Opcode::TCOLMAX;
    else
      throw NotSupportedError(fmt::format("pypto.{} at {}: reducing dim {} of a rank-{} tensor (a middle dim) is not supported yet",
                                          op_info(op.kind).name, op.loc.str(), k, r));
    std::vector<int64_t> acc_shape = s.tile;
    acc_shape[k] = 1;
    int acc = new_tile(acc_shape, outv.dtype);
    Instr fill{Opcode::TFILL};
    fill.dst = acc;
    fill.scalar = is_sum ? 0.0 : -std::numeric_limits<double>::infinity();

    std::vector<Stmt> inner;
    Instr ld{Opcode::TLOAD};
    ld.memref = op.inputs[0];
    ld.offsets = s.offset;
    ld.valid = s.valid;
    ld.dst = new_tile(s.tile, inv.dtype);
    inner.push_back(instr(ld));
    Instr rd{red};
    rd.srcs = {ld.dst};
    rd.valid = s.valid;
    rd.dst = new_tile(acc_shape, outv.dtype);
    inner.push_back(instr(rd));
    Instr comb{is_sum ? Opcode::TADD : Opcode::TMAX};
    comb.srcs = {acc, rd.dst};
    comb.dst = acc;
    inner.push_back(instr(comb));
    Loop red_loop = make_loop(s, k, false);
    red_loop.body = std::move(inner);

    // Store the accumulator: keepdim keeps the size-1 dim, otherwise reshape it away.
    std::vector<Stmt> body;
    body.push_back(instr(fill));
    body.push_back(Stmt{std::move(red_loop)});
    Instr st{Opcode::TSTORE};
    st.memref = op.output;
    int stored = acc;
    for (int d = 0; d < r; ++d) {
      if (d == k && !op.keepdim) continue;
      st.offsets.push_back(d == k ? Expr(0) : s.offset[d]);
      st.valid.push_back(d == k ? Expr(1) : s.valid[d]);
    }
    if (!op.keepdim) {
      std::vector<int64_t> shape;
      for (int d = 0; d < r; ++d)
        if (d != k) shape.push_back(acc_shape[d]);
      Instr rs{Opcode::TRESHAPE};
      rs.srcs = {acc};
      rs.dst = new_tile(shape, outv.dtype);
      body.push_back(instr(rs));
      stored = rs.dst;
    }
    st.srcs = {stored};
    body.push_back(instr(st));

    std::vector<int> dims;
    for (int d = 0; d < r; ++d)
      if (d != k) dims.push_back(d);
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
