// fuse_attention: Tensor Graph -> Tensor Graph.
//
// Attention written from primitives,
//
//   s = matmul(q, kt)            (optionally times or divided by a constant,
//                                 then optionally plus an additive mask [.., S, T])
//   e = exp(s - amax(s, -1, keepdim=True))
//   o = matmul(e / sum(e, -1, keepdim=True), v)
//
// would keep the S x T score matrix and its exponentials in global
// workspaces. When every intermediate of that chain is read only inside the
// chain (not returned, not viewed, not read by any other op), this pass
// replaces the chain by one `attention` op that expand_tiles tiles as an
// online softmax over key blocks (flash attention): per block of query rows, a
// running row max, a running row sum and an output accumulator stay in tiles
// while the key and value blocks stream past. The scores never reach memory.
//
// The mask (a causal or padding mask of 0 and -inf, say) is read block by block
// with the keys. A mask built in the program as a causal one, where(arange(T)[1, T]
// - arange(S)[S, 1] > c, -inf, x), also gives the op its bound `causal = c`:
// expand_tiles then stops each task's key loop where every later key block is
// -inf for all of its rows. The mask's leading dims may be 1 (one mask for every batch index and
// head), and so may the leading dims of the key and the value (grouped-query
// attention: one key/value head for a group of query heads).
//
// A transposed key (`matmul(q, k, b_trans=True)` reads k through a transposed
// view) is first copied into a dense [.., D, T] tensor by a cast op, so that
// every key block is a dense tile load; the copy reads k once.
#include "passes/fuse_attention.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>

namespace pypto {

namespace {

/// One matched chain: the ops it replaces and what the attention op needs.
struct Match {
  std::vector<int> ops;  ///< op indices of the chain, mm1 first, mm2 last
  int q = -1, kt = -1, v = -1;
  int mask = -1;  ///< the additive mask, if the chain has one
  double scale = 1.0;
  std::optional<Expr> causal;  ///< the mask is -inf where key j - query row i > causal
};

class Matcher {
 public:
  explicit Matcher(const TensorGraph& g) : g_(g) {
    for (size_t i = 0; i < g.ops.size(); ++i) {
      const TensorOp& op = g.ops[i];
      for (int in : op.inputs) readers_[in].push_back(static_cast<int>(i));
      if (op_info(op.kind).cls == OpClass::Assemble || op_info(op.kind).cls == OpClass::Scatter) continue;
      producer_[op.output] = static_cast<int>(i);
    }
    for (int o : g.outputs) returned_.insert(o);
  }

  /// The chain that ends in matmul op `i2`, if the op ends one.
  std::optional<Match> match(int i2) const {
    const TensorOp& mm2 = g_.ops[i2];
    if (mm2.kind != TensorOpKind::Matmul) return std::nullopt;
    Match m;
    int p = mm2.inputs[0];
    m.v = mm2.inputs[1];
    const TensorOp* div = inner(p, TensorOpKind::Div, {i2});
    if (!div || div->inputs.size() != 2) return std::nullopt;
    int e = div->inputs[0], l = div->inputs[1];
    int idiv = producer_.at(p);
    const TensorOp* sum = inner(l, TensorOpKind::Sum, {idiv});
    if (!sum || !last_dim_keepdim(*sum) || sum->inputs[0] != e) return std::nullopt;
    int isum = producer_.at(l);
    const TensorOp* ex = inner(e, TensorOpKind::Exp, {isum, idiv});
    if (!ex) return std::nullopt;
    int t = ex->inputs[0], iexp = producer_.at(e);
    const TensorOp* sub = inner(t, TensorOpKind::Sub, {iexp});
    if (!sub || sub->inputs.size() != 2) return std::nullopt;
    int s = sub->inputs[0], mx = sub->inputs[1], isub = producer_.at(t);
    const TensorOp* amax = inner(mx, TensorOpKind::Amax, {isub});
    if (!amax || !last_dim_keepdim(*amax) || amax->inputs[0] != s) return std::nullopt;
    int iamax = producer_.at(mx);
    std::vector<int> chain = {iamax, isub, iexp, isum, idiv, i2};
    // The scores: matmul(q, kt), optionally scaled by a constant.
    auto ps = producer_.find(s);
    if (ps == producer_.end()) return std::nullopt;
    const TensorOp* mm1 = &g_.ops[ps->second];
    std::vector<int> s_readers = {iamax, isub};
    if (mm1->kind == TensorOpKind::Add) {  // scores + mask
      int iadd = ps->second;
      if (!only_read_by(s, s_readers) || !same_region(*mm1, mm2) || !fp32(*mm1) || mm1->inputs.size() != 2)
        return std::nullopt;
      auto scores_side = [&](int x) {
        auto px = producer_.find(x);
        if (px == producer_.end() || !only_read_by(x, {iadd})) return false;
        const TensorOp& p = g_.ops[px->second];
        return p.kind == TensorOpKind::Matmul || scale_of(p).has_value();
      };
      int a = mm1->inputs[0], b = mm1->inputs[1];
      int scores = scores_side(a) ? a : scores_side(b) ? b : -1;
      if (scores < 0) return std::nullopt;
      m.mask = scores == a ? b : a;
      chain.insert(chain.begin(), iadd);
      s_readers = {iadd};
      s = scores;
      ps = producer_.find(s);
      mm1 = &g_.ops[ps->second];
    }
    if (mm1->kind != TensorOpKind::Matmul) {
      std::optional<double> c = scale_of(*mm1);
      if (!c || !only_read_by(s, s_readers) || !same_region(*mm1, mm2)) return std::nullopt;
      m.scale = *c;
      chain.insert(chain.begin(), ps->second);
      s_readers = {ps->second};
      s = mm1->inputs[0];
      ps = producer_.find(s);
      if (ps == producer_.end()) return std::nullopt;
      mm1 = &g_.ops[ps->second];
      if (mm1->kind != TensorOpKind::Matmul) return std::nullopt;
    }
    if (!only_read_by(s, s_readers) || !same_region(*mm1, mm2) || !fp32(*mm1)) return std::nullopt;
    chain.insert(chain.begin(), ps->second);
    m.q = mm1->inputs[0];
    m.kt = mm1->inputs[1];
    if (!shapes_fit(m, mm2.output) || (m.mask >= 0 && !mask_fits(m))) return std::nullopt;
    // Nothing between the two matmuls may write memory the chain reads later.
    for (int i = chain.front() + 1; i < i2; ++i) {
      OpClass c = op_info(g_.ops[i].kind).cls;
      if (c == OpClass::Assemble || c == OpClass::Scatter) return std::nullopt;
    }
    m.ops = chain;
    if (m.mask >= 0) m.causal = causal_bound(m.mask);
    return m;
  }

  /// c when `mask` is a causal mask written from primitives, where(j - i > c, -inf, x) over
  /// column indices j (arange, shaped [.., 1, T] or [T]) and row indices i (arange shaped [S, 1]):
  /// -inf wherever key j of query row i has j - i > c (a `>= c` compare gives c - 1). Else nothing.
  std::optional<Expr> causal_bound(int mask) const {
    const TensorOp* where = producer_op(mask);
    if (!where || where->kind != TensorOpKind::Where || where->operands.size() != 3) return std::nullopt;
    const Operand& masked = where->operands[1];
    if (masked.is_tensor() || masked.sym || !(std::isinf(masked.constant) && masked.constant < 0))
      return std::nullopt;
    const TensorOp* cmp = producer_op(where->operands[0].value);
    if (!cmp || (cmp->kind != TensorOpKind::Gt && cmp->kind != TensorOpKind::Ge) || cmp->operands.size() != 2 ||
        !cmp->operands[0].is_tensor() || cmp->operands[1].is_tensor())
      return std::nullopt;
    const Operand& c = cmp->operands[1];
    Expr bound;
    if (c.sym) {
      bound = *c.sym;
    } else {
      if (c.is_bool || !std::isfinite(c.constant) || std::fabs(c.constant) > 1e15) return std::nullopt;
      bound = Expr(static_cast<int64_t>(std::floor(c.constant)));
    }
    if (cmp->kind == TensorOpKind::Ge) bound = bound - Expr(1);
    const TensorOp* sub = producer_op(cmp->operands[0].value);
    if (!sub || sub->kind != TensorOpKind::Sub || sub->operands.size() != 2 || !sub->operands[0].is_tensor() ||
        !sub->operands[1].is_tensor())
      return std::nullopt;
    if (!index_along(sub->operands[0].value, true) || !index_along(sub->operands[1].value, false)) return std::nullopt;
    return bound;
  }

  /// The op producing `value`, if an op does.
  const TensorOp* producer_op(int value) const {
    auto it = producer_.find(value);
    return it == producer_.end() ? nullptr : &g_.ops[it->second];
  }

  /// `value` is arange(0, n) (step 1) of INT32, INT64 or FP32, possibly reshaped, laid along its last dim (`columns`: shape
  /// [n] or [.., 1, n]) or along its second-last dim (rows: shape [.., n, 1]), all other dims 1.
  bool index_along(int value, bool columns) const {
    const TensorOp* op = producer_op(value);
    if (op && op->kind == TensorOpKind::Reshape && op->inputs.size() == 1) op = producer_op(op->inputs[0]);
    if (!op || op->kind != TensorOpKind::Arange || op->start != 0.0 || op->step != 1.0) return false;
    // Only dtypes whose subtraction of two indices is exact and signed: a narrow or unsigned
    // integer index wraps, and its mask is then no causal mask.
    const DataType dt = g_.value(value).dtype;
    if (dt != DataType::INT32 && dt != DataType::INT64 && dt != DataType::FP32) return false;
    const std::vector<Expr>& shape = g_.value(value).shape;
    const Expr& n = g_.value(op->output).shape.at(0);
    const size_t r = shape.size(), along = columns ? r - 1 : r - 2;
    if (r < (columns ? 1u : 2u)) return false;
    for (size_t d = 0; d < r; ++d) {
      auto one = shape[d].as_const();
      if (d == along ? !shape[d].equals(n) : !(one && *one == 1)) return false;
    }
    return true;
  }

 private:
  /// The op of `kind` that produces `value`, when `value` is an FP32 intermediate of the chain read
  /// only by `readers` (in the same control region as the last of them).
  const TensorOp* inner(int value, TensorOpKind kind, const std::vector<int>& readers) const {
    auto it = producer_.find(value);
    if (it == producer_.end()) return nullptr;
    const TensorOp& op = g_.ops[it->second];
    if (op.kind != kind || !only_read_by(value, readers) || !fp32(op)) return nullptr;
    if (!same_region(op, g_.ops[readers.back()])) return nullptr;
    for (const Operand& o : op.operands)
      if (!o.is_tensor()) return nullptr;
    return &op;
  }

  bool only_read_by(int value, std::vector<int> readers) const {
    if (returned_.count(value) || g_.value(value).view) return false;
    auto it = readers_.find(value);
    if (it == readers_.end()) return false;
    std::vector<int> found = it->second;
    std::sort(found.begin(), found.end());
    found.erase(std::unique(found.begin(), found.end()), found.end());
    std::sort(readers.begin(), readers.end());
    return found == readers;
  }

  bool fp32(const TensorOp& op) const {
    return op.compute == DataType::FP32 && g_.value(op.output).dtype == DataType::FP32;
  }

  static bool same_region(const TensorOp& a, const TensorOp& b) { return a.region == b.region; }

  /// A reduction over the last dim of its input only, keeping it.
  bool last_dim_keepdim(const TensorOp& op) const {
    std::vector<int> dims = op.dims.empty() ? std::vector<int>{op.dim} : op.dims;
    int last = static_cast<int>(g_.value(op.inputs[0]).shape.size()) - 1;
    return op.keepdim && dims.size() == 1 && dims[0] == last;
  }

  /// The factor of `s * c`, `c * s` or `s / c` (a numeric constant), else nothing.
  static std::optional<double> scale_of(const TensorOp& op) {
    if (op.operands.size() != 2 || op.inputs.size() != 1) return std::nullopt;
    int ci = op.operands[0].is_tensor() ? 1 : 0;
    const Operand& c = op.operands[ci];
    if (c.sym || c.is_bool) return std::nullopt;
    if (op.kind == TensorOpKind::Mul) return c.constant;
    if (op.kind == TensorOpKind::Div && ci == 1 && c.constant != 0.0) return 1.0 / c.constant;
    return std::nullopt;
  }

  /// q [.., S, D], kt [.., D, T], v [.., T, Dv] of one rank, equal batch dims, constant D and Dv,
  /// float types and no tails.
  bool shapes_fit(const Match& m, int out) const {
    const TensorValue &q = g_.value(m.q), &kt = g_.value(m.kt), &v = g_.value(m.v), &o = g_.value(out);
    size_t r = q.shape.size();
    if (r < 2 || kt.shape.size() != r || v.shape.size() != r || o.shape.size() != r) return false;
    for (const TensorValue* x : {&q, &kt, &v, &o}) {
      if (!dtype_is_float(x->dtype)) return false;
      for (size_t d = 0; d < r; ++d)
        if (!x->valid[d].equals(x->shape[d])) return false;
    }
    // Leading dims: the key's and the value's equal the query's or are 1 (shared by a group).
    for (size_t d = 0; d + 2 < r; ++d)
      if (!q.shape[d].equals(o.shape[d]) || !batch_dim_fits(kt.shape[d], q.shape[d]) ||
          !batch_dim_fits(v.shape[d], q.shape[d]))
        return false;
    // A task holds whole rows of q and of the output: the head sizes must be constants.
    if (!kt.shape[r - 2].as_const() || !v.shape[r - 1].as_const()) return false;
    return q.shape[r - 1].equals(kt.shape[r - 2]) && kt.shape[r - 1].equals(v.shape[r - 2]);
  }

  /// A leading dim of a key, value or mask: the query's, or 1 (broadcast).
  static bool batch_dim_fits(const Expr& x, const Expr& q) {
    auto c = x.as_const();
    return x.equals(q) || (c && *c == 1);
  }

  /// The mask: a float tensor of rank <= the query's whose last dims are [S, T] (the scores') and
  /// whose leading dims are the query's or 1, no tails.
  bool mask_fits(const Match& m) const {
    const TensorValue &q = g_.value(m.q), &kt = g_.value(m.kt), &mk = g_.value(m.mask);
    size_t r = q.shape.size(), rm = mk.shape.size();
    if (rm < 2 || rm > r || !dtype_is_float(mk.dtype)) return false;
    for (size_t d = 0; d < rm; ++d)
      if (!mk.valid[d].equals(mk.shape[d])) return false;
    if (!mk.shape[rm - 2].equals(q.shape[r - 2]) || !mk.shape[rm - 1].equals(kt.shape[r - 1])) return false;
    for (size_t d = 0; d + 2 < rm; ++d)
      if (!batch_dim_fits(mk.shape[d], q.shape[d + (r - rm)])) return false;
    return true;
  }

  const TensorGraph& g_;
  std::map<int, std::vector<int>> readers_;
  std::map<int, int> producer_;
  std::set<int> returned_;
};

/// Drops the values no op, parameter or output refers to any more (the chains' scores, exponentials
/// and row statistics), renumbering the rest, so that later levels hold no memrefs for them.
void drop_dead_values(TensorGraph& g) {
  std::vector<char> live(g.values.size(), 0);
  for (int p : g.params) live[p] = 1;
  for (int o : g.outputs) live[o] = 1;
  for (const TensorOp& op : g.ops) {
    live[op.output] = 1;
    for (int in : op.inputs) live[in] = 1;
  }
  for (size_t i = g.values.size(); i-- > 0;)  // a view keeps its base (bases come first)
    if (live[i] && g.values[i].view) live[g.values[i].view->base] = 1;
  std::vector<int> id(g.values.size(), -1);
  std::vector<TensorValue> kept;
  for (size_t i = 0; i < g.values.size(); ++i) {
    if (!live[i]) continue;
    id[i] = static_cast<int>(kept.size());
    kept.push_back(g.values[i]);
    kept.back().id = id[i];
  }
  for (TensorValue& v : kept)
    if (v.view) v.view->base = id[v.view->base];
  for (int& p : g.params) p = id[p];
  for (int& o : g.outputs) o = id[o];
  for (TensorOp& op : g.ops) {
    op.output = id[op.output];
    for (int& in : op.inputs) in = id[in];
    for (Operand& o : op.operands)
      if (o.is_tensor()) o.value = id[o.value];
  }
  g.values = std::move(kept);
}

}  // namespace

TensorGraph FuseAttention(const TensorGraph& g, const PassOptions&) {
  Matcher matcher(g);
  TensorGraph out = g;
  std::set<int> removed;
  std::map<int, std::vector<TensorOp>> replacement;  // index of a chain's last matmul -> ops in its place
  for (size_t i = 0; i < g.ops.size(); ++i) {
    std::optional<Match> m = matcher.match(static_cast<int>(i));
    if (!m) continue;  // (chains never share an op: each intermediate has only its chain's readers)
    removed.insert(m->ops.begin(), m->ops.end());
    const TensorOp& mm1 = g.ops[m->ops.front()];
    const TensorOp& mm2 = g.ops[i];
    std::vector<TensorOp>& ops = replacement[static_cast<int>(i)];
    int kt = m->kt;
    if (out.values[kt].view) {
      // A dense FP32 copy of the (transposed) key, so every key block is a dense tile.
      TensorValue dense;
      dense.id = static_cast<int>(out.values.size());
      dense.shape = out.values[kt].shape;
      const ViewMap& view = *out.values[kt].view;
      size_t r = dense.shape.size();
      bool transposed = !view.reshape && view.map.size() == r && view.map[r - 2] == static_cast<int>(r) - 1 &&
                        view.map[r - 1] == static_cast<int>(r) - 2;
      dense.name = transposed ? out.values[view.base].name + "_t" : fmt::format("v{}", dense.id);
      for (const TensorValue& v : out.values)
        if (v.name == dense.name) dense.name = fmt::format("v{}", dense.id);
      dense.valid = dense.shape;
      dense.dtype = DataType::FP32;
      out.values.push_back(dense);
      std::vector<int64_t> tile(r, 1);
      tile[r - 2] = tile[r - 1] = 64;
      TensorOp copy{TensorOpKind::Cast, {kt}, dense.id, -1, false, tile, mm1.loc};
      copy.operands = {Operand::tensor(kt)};
      copy.compute = DataType::FP32;
      copy.region = mm2.region;
      ops.push_back(copy);
      kt = dense.id;
    }
    TensorOp att{TensorOpKind::Attention, {m->q, kt, m->v}, mm2.output, -1, false, {}, mm1.loc};
    att.operands = {Operand::tensor(m->q), Operand::tensor(kt), Operand::tensor(m->v)};
    if (m->mask >= 0) {
      att.inputs.push_back(m->mask);
      att.operands.push_back(Operand::tensor(m->mask));
    }
    att.compute = DataType::FP32;
    att.region = mm2.region;
    att.cube_tile = mm1.cube_tile;
    att.cube_tile_l0 = mm1.cube_tile_l0;
    att.scale = m->scale;
    att.causal = m->causal;
    ops.push_back(att);
  }
  if (removed.empty()) return out;
  out.ops.clear();
  for (size_t i = 0; i < g.ops.size(); ++i) {
    auto it = replacement.find(static_cast<int>(i));
    if (it != replacement.end()) out.ops.insert(out.ops.end(), it->second.begin(), it->second.end());
    else if (!removed.count(static_cast<int>(i))) out.ops.push_back(g.ops[i]);
  }
  drop_dead_values(out);
  return out;
}

}  // namespace pypto
