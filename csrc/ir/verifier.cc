#include "ir/verifier.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <functional>
#include <map>
#include <optional>
#include <set>

#include "ir/errors.h"

namespace pypto {

namespace {

/// Whether tile shape `b` is read as a [k, n] matmul operand: its last two dims are k and n (with
/// batch dims before them), or its dims split into leading ones of product k and trailing ones of
/// product n (row-major, the same elements: a conv's input rows, [1, channels, rows, width]).
bool reads_as_k_by_n(const std::vector<int64_t>& b, int64_t k, int64_t n) {
  const size_t r = b.size();
  if (r >= 2 && b[r - 2] == k && b[r - 1] == n) return true;
  int64_t lead = 1;
  for (size_t p = 0; p + 1 < r; ++p) {
    lead *= b[p];
    if (lead != k) continue;
    int64_t trail = 1;
    for (size_t q = p + 1; q < r; ++q) trail *= b[q];
    return trail == n;
  }
  return false;
}

[[noreturn]] void fail(const char* rule, const std::string& msg) {
  throw VerifyError(fmt::format("[{}] {}", rule, msg));
}

/// Checks statements against a scope of integer variables and a set of
/// defined tiles; `allow_*` select what the level permits.
struct StmtChecker {
  const std::vector<MemRef>& memrefs;
  const std::vector<TileDecl>& tiles;
  std::function<bool(int)> memref_visible;  ///< may this code touch the memref?
  bool allow_instr = true;
  bool allow_call = false;
  bool allow_if = false;
  bool allow_fused = false;
  const std::vector<InCoreFunction>* functions = nullptr;
  std::set<std::string> scope;
  std::set<int> defined_tiles;

  const TileDecl* tile(int id) const {
    for (const auto& t : tiles)
      if (t.id == id) return &t;
    return nullptr;
  }

  static bool has_var(const Expr& x) {
    if (x.is_const()) return false;
    if (x.is_var()) return true;
    return has_var(x.lhs()) || has_var(x.rhs());
  }

  void check_expr(const Expr& e, const std::string& what) {
    std::function<void(const Expr&)> walk = [&](const Expr& x) {
      if (x.is_const()) return;
      if (x.is_var()) {
        if (!scope.count(x.name())) fail("scope", fmt::format("{} uses '{}' outside its scope", what, x.name()));
        return;
      }
      walk(x.lhs());
      walk(x.rhs());
      // A constant part that cannot be computed (a divisor that is 0 whatever the scalars are, as
      // `(8 // 0)` or `(n % (4 - 4))`, or a result past 64 bits) is a program error; what depends on
      // the scalars is checked where it is evaluated.
      if (x.kind() == Expr::Kind::FloorDiv || x.kind() == Expr::Kind::Mod) {
        std::optional<int64_t> d;
        try {
          d = x.rhs().substitute({}).as_const();
        } catch (const UserError&) {  // reported below, for the divisor itself
        }
        if (d && *d == 0) fail("expr.zero-divisor", fmt::format("{}: the divisor {} of {} is 0", what, x.rhs().str(), x.str()));
      }
      if (!has_var(x)) {
        try {
          (void)x.substitute({});
        } catch (const UserError& err) {
          fail("expr.constant", fmt::format("{}: {} cannot be computed: {}", what, x.str(), err.what()));
        }
      }
    };
    walk(e);
  }

  void check_memref(int id, const std::string& what) {
    if (id < 0 || id >= static_cast<int>(memrefs.size())) fail("memref.exists", fmt::format("{} names memref {} which does not exist", what, id));
    if (memref_visible && !memref_visible(id))
      fail("memref.visible", fmt::format("{} touches %{} which is not visible here", what, memrefs[id].name));
  }

  void check_instr(const Instr& in) {
    std::string what = opcode_name(in.op);
    if (!allow_instr) fail("level.no-instr", fmt::format("tile instruction {} is not allowed at this level", what));
    if (in.view && in.op != Opcode::TLOAD) fail("instr.view", fmt::format("{}: only a tload may view its source", what));
    if (in.strided && !in.view) fail("instr.view", fmt::format("{}: strided without view", what));
    if (in.stream && in.op != Opcode::TSTORE) fail("instr.stream", fmt::format("{}: only a tstore may stream", what));
    if (in.atomic && in.op != Opcode::TSTORE) fail("instr.atomic", fmt::format("{}: only a tstore may be atomic_add", what));
    if (in.panels < 0 || (in.panels > 0 && in.op != Opcode::TLOAD && in.op != Opcode::TMATMUL &&
                          in.op != Opcode::TMATMUL_ACC))
      fail("instr.panels", fmt::format("{}: panels={}: only a tload or a matmul takes a positive panel width", what,
                                       in.panels));
    if (static_cast<int>(in.srcs.size()) != instr_num_srcs(in))
      fail("instr.arity", fmt::format("{} takes {} source tiles, found {}", what, instr_num_srcs(in), in.srcs.size()));
    for (int s : in.srcs) {
      if (!tile(s)) fail("tile.declared", fmt::format("{} reads undeclared tile {}", what, s));
      if (!defined_tiles.count(s))
        fail("tile.use-before-def", fmt::format("{} reads tile %{} before it is written", what, tile(s)->name));
    }
    const TileDecl* dst = nullptr;
    if (!writes_memory(in.op)) {
      dst = tile(in.dst);
      if (!dst) fail("tile.declared", fmt::format("{} writes undeclared tile {}", what, in.dst));
    }
    if (reads_memory(in.op) || writes_memory(in.op)) {
      check_memref(in.memref, what);
      const MemRef& m = memrefs[in.memref];
      if (in.offsets.size() != m.shape.size())
        fail("memref.rank", fmt::format("{} of %{} has {} offsets, the memref has rank {}", what, m.name,
                                        in.offsets.size(), m.shape.size()));
      const TileDecl* t = tile(memory_tile(in));
      // The data tile (for TSCATTER the source, not the index) carries the memref's compute dtype.
      const TileDecl* data = in.op == Opcode::TSCATTER ? tile(in.srcs[1]) : t;
      if (t->shape.size() != m.shape.size())
        fail("tile.rank", fmt::format("{} moves tile %{} of rank {} through memref %{} of rank {}", what, t->name,
                                      t->shape.size(), m.name, m.shape.size()));
      if (in.op == Opcode::TLOAD && in.panels > 0 &&
          (in.view || t->dtype != DataType::FP32 || t->shape.size() < 2 || t->shape.back() % in.panels != 0))
        fail("instr.panels", fmt::format("{}: panels={} needs an fp32 tile of rank 2 or more whose columns ({}) the "
                                         "width divides, and no view", what, in.panels, t->shape.back()));
      // A load may also keep the stored type (the int8 operands of an int32 matmul).
      const bool stored_type = in.op == Opcode::TLOAD && data->dtype == m.dtype;
      if (data->dtype != compute_dtype(m.dtype) && !stored_type)
        fail("tile.dtype", fmt::format("{}: tile %{} is {}, memref %{} ({}) computes in {}", what, data->name,
                                       dtype_name(data->dtype), m.name, dtype_name(m.dtype),
                                       dtype_name(compute_dtype(m.dtype))));
      for (const Expr& e : in.offsets) check_expr(e, what);
    }
    if (in.scalar_expr) check_expr(*in.scalar_expr, what);
    if (!in.window.empty()) {
      if (in.op != Opcode::TSCATTER || in.window.size() != 2)
        fail("instr.window", fmt::format("{} has a window of {} expressions; only tscatter takes one, [base, bound]",
                                         what, in.window.size()));
      for (const Expr& e : in.window) check_expr(e, what);
    }
    if (!in.valid.empty()) {
      const TileDecl* t = dst && !is_reduction(in.op) ? dst : tile(in.srcs.empty() ? in.dst : in.srcs[0]);
      if (in.valid.size() != t->shape.size())
        fail("tile.valid-rank", fmt::format("{} has {} valid extents for tile %{} of rank {}", what, in.valid.size(),
                                            t->name, t->shape.size()));
      for (const Expr& e : in.valid) check_expr(e, what);
    }
    // Shape rules of compute instructions.
    auto same = [&](const TileDecl* a, const TileDecl* b) { return a->shape == b->shape; };
    switch (opcode_info(in.op).form) {
      case OpForm::Binary: case OpForm::Select:
        for (int s : in.srcs)
          if (!same(dst, tile(s))) fail("instr.shape", fmt::format("{} needs equal tile shapes", what));
        break;
      case OpForm::Unary: case OpForm::Cast:
        if (!same(dst, tile(in.srcs[0]))) fail("instr.shape", fmt::format("{} needs equal tile shapes", what));
        break;
      case OpForm::RowExpand: {
        const TileDecl* b = tile(in.srcs[1]);
        if (!same(dst, tile(in.srcs[0])) || b->shape.back() != 1 || b->shape.size() != dst->shape.size())
          fail("instr.shape", fmt::format("{} needs src1 of shape [..., 1] matching src0", what));
        break;
      }
      case OpForm::Sort: {
        const TileDecl* src = tile(in.srcs[0]);
        bool ok = src->shape.size() == dst->shape.size() && !dst->shape.empty() &&
                  dst->shape.back() <= src->shape.back();
        for (size_t d = 0; ok && d + 1 < dst->shape.size(); ++d) ok = dst->shape[d] == src->shape[d];
        if (!ok)
          fail("instr.shape", fmt::format("{}: destination [{}] must be the source's shape [{}] with at most its last "
                                          "dim kept",
                                          what, fmt::join(dst->shape, ", "), fmt::join(src->shape, ", ")));
        break;
      }
      case OpForm::Scan: {
        const TileDecl* src = tile(in.srcs[0]);
        const TileDecl* carry = tile(in.srcs[1]);
        const int64_t rank = static_cast<int64_t>(src->shape.size());
        if (in.axis < 0 || in.axis >= rank)
          fail("instr.axis", fmt::format("{}: axis={} is not a dim of the source tile (rank {})", what, in.axis, rank));
        std::vector<int64_t> want = src->shape;
        want[in.axis] = 1;
        if (!same(dst, src) || carry->shape != want)
          fail("instr.shape", fmt::format("{} needs a destination of the source's shape and a carry of shape [{}]", what,
                                          fmt::join(want, ", ")));
        break;
      }
      case OpForm::Matmul: case OpForm::MatmulAcc: {
        bool acc = opcode_info(in.op).form == OpForm::MatmulAcc;
        const TileDecl* a = tile(in.srcs[acc ? 1 : 0]);
        const TileDecl* b = tile(in.srcs[acc ? 2 : 1]);
        size_t ra = a->shape.size(), rb = b->shape.size(), rd = dst->shape.size();
        if (in.b_trans) {  // b is [N, K]: its trailing dims are N and K; no L0 blocks
          if (in.panels > 0) fail("instr.panels", fmt::format("{}: a b_trans product reads b by rows, not in panels", what));
          if (ra < 2 || rb < 2 || rd < 2 || b->shape[rb - 1] != a->shape[ra - 1] ||
              b->shape[rb - 2] != dst->shape[rd - 1] || dst->shape[rd - 2] != a->shape[ra - 2] ||
              (acc && in.srcs[0] != in.dst) || !in.l0.empty())
            fail("instr.shape", fmt::format("{}: tiles do not form [M, K] @ [N, K]^T -> [M, N] (b_trans takes no l0)",
                                            what));
          break;
        }
        if (ra < 2 || rb < 2 || rd < 2 || !reads_as_k_by_n(b->shape, a->shape[ra - 1], dst->shape[rd - 1]) ||
            dst->shape[rd - 2] != a->shape[ra - 2] || (acc && in.srcs[0] != in.dst))
          fail("instr.shape", fmt::format("{}: tiles do not form [M, K] @ [K, N] -> [M, N]", what));
        if (in.panels > 0) {
          const int64_t n0 = in.l0.size() == 3 ? in.l0[2] : dst->shape[rd - 1];
          if (dst->dtype != DataType::FP32 || b->dtype != DataType::FP32 || b->shape[rb - 1] % in.panels != 0 ||
              n0 % in.panels != 0)
            fail("instr.panels", fmt::format("{}: panels={} needs fp32 tiles and a width dividing b's columns ({}) and "
                                             "the l0 n ({})", what, in.panels, b->shape[rb - 1], n0));
        }
        if (!in.l0.empty()) {
          const int64_t tile_mkn[] = {a->shape[ra - 2], a->shape[ra - 1], dst->shape[rd - 1]};
          bool ok = in.l0.size() == 3;
          for (size_t i = 0; ok && i < 3; ++i) ok = in.l0[i] > 0 && tile_mkn[i] % in.l0[i] == 0;
          if (!ok)
            fail("instr.l0", fmt::format("{}: l0 [{}] must give 3 positive sizes dividing the tile's m, k, n ({}, {}, {})",
                                         what, fmt::join(in.l0, ", "), tile_mkn[0], tile_mkn[1], tile_mkn[2]));
        }
        break;
      }
      default: break;
    }
    check_dtypes(in, dst);
    if (dst) defined_tiles.insert(dst->id);
  }

  /// The element types the kernels need: a tile op computes in one C++ type, so its tiles agree;
  /// TCAST converts; a comparison may write into another type; indices and conditions are integers.
  void check_dtypes(const Instr& in, const TileDecl* dst) {
    const std::string what = opcode_name(in.op);
    auto name = [](DataType d) { return dtype_pto_name(d); };
    auto same = [&](const TileDecl* a, const TileDecl* b) {
      if (a->dtype != b->dtype)
        fail("instr.dtype", fmt::format("{}: tile %{} is {} but tile %{} is {}; the operands of {} have one dtype", what,
                                        a->name, name(a->dtype), b->name, name(b->dtype), what));
    };
    auto integer_index = [&](const TileDecl* t, const char* role) {
      if (t->dtype != DataType::INT32 && t->dtype != DataType::INT64)
        fail("instr.dtype", fmt::format("{}: the {} tile %{} is {}; it must be i32 or i64", what, role, t->name,
                                        name(t->dtype)));
    };
    auto check_axis = [&](int64_t rank, const char* of) {
      if (in.axis < 0 || in.axis >= rank)
        fail("instr.axis", fmt::format("{}: axis={} is not a dim of the {} (rank {})", what, in.axis, of, rank));
    };
    std::vector<const TileDecl*> srcs;
    for (int s : in.srcs) srcs.push_back(tile(s));
    const OpForm form = opcode_info(in.op).form;
    switch (form) {
      case OpForm::Load: case OpForm::Store: case OpForm::Fill: case OpForm::Arange: case OpForm::Cast:
        return;
      case OpForm::Random:
        if (!dtype_is_float(dst->dtype))
          fail("instr.dtype", fmt::format("{}: the destination tile %{} is {}; random draws are floats", what,
                                          dst->name, name(dst->dtype)));
        if (in.offsets.size() != dst->shape.size() + 1)
          fail("instr.offsets", fmt::format("{}: a position, {} row strides and a block base expected for a rank-{} "
                                            "tile, found {} values", what, dst->shape.size() - 1, dst->shape.size(),
                                            in.offsets.size()));
        if (in.random.rounds != 7 && in.random.rounds != 10)
          fail("instr.rounds", fmt::format("{}: {} rounds; Philox runs 7 or 10", what, in.random.rounds));
        return;
      case OpForm::Sort:
        if (dst->dtype != DataType::INT32)
          fail("instr.dtype", fmt::format("{}: the destination tile %{} is {}; positions are i32", what, dst->name,
                                          name(dst->dtype)));
        return;
      case OpForm::Gather: case OpForm::Scatter:
        integer_index(srcs[0], "index");
        check_axis(static_cast<int64_t>(memrefs[in.memref].shape.size()), "memref");
        return;
      case OpForm::Matmul: case OpForm::MatmulAcc: {
        // One dtype throughout, or int8 / int16 operands of an int32 product, or bf16 ones of a float one.
        const bool acc = form == OpForm::MatmulAcc;
        const TileDecl* a = srcs[acc ? 1 : 0];
        const TileDecl* b = srcs[acc ? 2 : 1];
        // b_trans: a float product may read a bf16 b (widened as it is read).
        if (!(in.b_trans && a->dtype == DataType::FP32 && b->dtype == DataType::BF16)) same(a, b);
        if (acc) same(dst, srcs[0]);
        // Or bf16 a and b of a float product (by bf16 dot products where the target has them; b
        // as it lies, [K, N], or transposed, [N, K], with b_trans).
        const bool widening = (dst->dtype == DataType::INT32 &&
                               (a->dtype == DataType::INT8 || a->dtype == DataType::INT16)) ||
                              (dst->dtype == DataType::FP32 && a->dtype == DataType::BF16);
        if (!widening) same(dst, a);
        return;
      }
      case OpForm::Binary:
        // The result converts to the destination's type.
        if (srcs.size() == 2) same(srcs[0], srcs[1]);
        return;
      case OpForm::Select: {
        // The condition is the first operand unless the constant takes its place (scalar_pos 0).
        size_t v = 0;
        if (in.scalar_pos != 0) {
          if (srcs[0]->dtype != DataType::INT32)
            fail("instr.dtype", fmt::format("tselect: the condition tile %{} is {}; it must be i32 (a comparison's "
                                            "result)",
                                            srcs[0]->name, name(srcs[0]->dtype)));
          v = 1;
        }
        for (; v < srcs.size(); ++v) same(dst, srcs[v]);
        return;
      }
      default: break;
    }
    if (is_reduction(in.op)) {
      const TileDecl* s = srcs[0];
      same(dst, s);
      const bool row = form == OpForm::RowReduce;
      const bool red = form == OpForm::AxisReduce;
      const int64_t rank = static_cast<int64_t>(s->shape.size());
      if (red) check_axis(rank, "source tile");
      const int64_t axis = red ? in.axis : row ? rank - 1 : 0;
      int64_t rest = 1, out = 1;
      for (int64_t d = 0; d < rank; ++d) rest *= d == axis ? 1 : s->shape[d];
      for (int64_t d : dst->shape) out *= d;
      if (out < rest)
        fail("instr.shape", fmt::format("{}: tile %{} has {} elements, reducing dim {} of tile %{} gives {}", what,
                                        dst->name, out, axis, s->name, rest));
      return;
    }
    // Everything else computes in the destination's type on sources of that type.
    for (const TileDecl* s : srcs) same(dst, s);
  }

  void check_call(const Call& c) {
    if (!allow_call) fail("level.no-call", "CALL is not allowed at this level");
    if (!functions || c.callee < 0 || c.callee >= static_cast<int>(functions->size()))
      fail("call.callee", fmt::format("CALL names function {} which does not exist", c.callee));
    const InCoreFunction& f = (*functions)[c.callee];
    if (c.args.size() != f.params.size())
      fail("call.arity", fmt::format("CALL @{} passes {} regions, the function takes {}", f.name, c.args.size(), f.params.size()));
    if (c.scalars.size() != f.scalar_params.size())
      fail("call.arity", fmt::format("CALL @{} passes {} scalars, the function takes {}", f.name, c.scalars.size(),
                                     f.scalar_params.size()));
    for (size_t i = 0; i < c.args.size(); ++i) {
      const CallArg& a = c.args[i];
      if (a.memref >= 0 && a.memref < static_cast<int>(memrefs.size()) && memrefs[a.memref].kind == MemKind::Local)
        fail("call.local", fmt::format("CALL @{} passes local buffer %{}", f.name, memrefs[a.memref].name));
      check_memref(a.memref, "CALL @" + f.name);
      const MemRef& m = memrefs[a.memref];
      if (a.offsets.size() != m.shape.size() || a.extents.size() != m.shape.size())
        fail("memref.rank", fmt::format("CALL @{}: region of %{} does not match its rank {}", f.name, m.name, m.shape.size()));
      if (m.shape.size() != f.params[i].max_extents.size())
        fail("call.rank", fmt::format("CALL @{}: %{} has rank {}, parameter %{} rank {}", f.name, m.name, m.shape.size(),
                                      f.params[i].name, f.params[i].max_extents.size()));
      if (m.dtype != f.params[i].dtype)
        fail("call.dtype", fmt::format("CALL @{}: %{} has the wrong dtype for parameter %{}", f.name, m.name, f.params[i].name));
      for (const Expr& e : a.offsets) check_expr(e, "CALL @" + f.name);
      for (const Expr& e : a.extents) check_expr(e, "CALL @" + f.name);
    }
    for (const Expr& e : c.scalars) check_expr(e, "CALL @" + f.name);
  }

  /// A fused run: instructions only, a loop whose strips divide its rows, chain instructions over
  /// tiles of the loop's element count, registers among their destinations, aliases among the run's
  /// reshapes, fast forms only of fp32 opcodes that have one in a run whose chain stays in registers
  /// (redoing a strip must read what the first pass read, so no chain value goes back to a tile).
  void check_fused(const Fused& f) {
    if (!allow_fused) fail("level.no-fused", "FUSED is only allowed in InCore functions");
    if (f.rows <= 0 || f.cols <= 0 || f.strip <= 0 || f.cols % f.strip != 0)
      fail("fused.strip", fmt::format("FUSED rows={} cols={} strip={}: sizes must be positive and the strip must "
                                      "divide cols", f.rows, f.cols, f.strip));
    std::set<int> chain_dsts, reshapes, fast_capable;
    for (const Stmt& s : f.body) {
      auto* in = std::get_if<Instr>(&s.node);
      if (in == nullptr) fail("fused.body", "FUSED holds instructions only");
      check_instr(*in);
      const FuseRole role = fuse_role(f, *in);
      if (in->op == Opcode::TRESHAPE) reshapes.insert(in->dst);
      if (role != FuseRole::Chain) continue;
      const TileDecl* t = tile(in->dst);
      const int64_t n = numel(t->shape);
      if (n != f.rows * f.cols)
        fail("fused.shape", fmt::format("FUSED over {} x {} elements: {} writes tile %{} of {}", f.rows, f.cols,
                                        opcode_name(in->op), t->name, n));
      chain_dsts.insert(in->dst);
      if (has_fast_form(in->op) && t->dtype == DataType::FP32) fast_capable.insert(in->dst);
    }
    if (chain_dsts.empty()) fail("fused.body", "FUSED has no elementwise instruction");
    for (int r : f.registers)
      if (!chain_dsts.count(r)) fail("fused.registers", fmt::format("FUSED keeps tile {} in registers, which no chain instruction writes", r));
    for (int a : f.aliases)
      if (!reshapes.count(a)) fail("fused.aliases", fmt::format("FUSED reads tile {} through its source, which no treshape of the run writes", a));
    for (int t : f.fast) {
      if (!fast_capable.count(t))
        fail("fused.fast", fmt::format("FUSED computes tile {} by a fast form, but no fp32 chain instruction with one writes it", t));
      const std::set<int> in_registers(f.registers.begin(), f.registers.end());
      if (in_registers != chain_dsts)
        fail("fused.fast", fmt::format("FUSED computes tile {} by a fast form, but not every chain value stays in registers", t));
    }
  }

  void check(const std::vector<Stmt>& stmts) {
    std::vector<std::string> bound_here;  // READ variables, in scope until the body ends
    for (const Stmt& s : stmts) {
      if (auto* in = std::get_if<Instr>(&s.node)) {
        check_instr(*in);
      } else if (auto* l = std::get_if<Loop>(&s.node)) {
        check_expr(l->start, "FOR bound");
        check_expr(l->stop, "FOR bound");
        check_expr(l->step, "FOR step");
        if (auto st = l->step.as_const(); st && *st <= 0) fail("loop.step", fmt::format("FOR %{} has step {}", l->var, *st));
        if (scope.count(l->var)) fail("loop.shadow", fmt::format("FOR %{} shadows a variable in scope", l->var));
        scope.insert(l->var);
        check(l->body);
        scope.erase(l->var);
      } else if (auto* f = std::get_if<Fused>(&s.node)) {
        check_fused(*f);
      } else if (auto* c = std::get_if<IfThen>(&s.node)) {
        if (!allow_if) fail("level.no-if", "IF is not allowed in a Tile Graph nest (only in functions and the orchestration)");
        check_expr(c->cond, "IF condition");
        check(c->then_body);
        check(c->else_body);
      } else if (auto* r = std::get_if<ReadScalar>(&s.node)) {
        if (!allow_call) fail("level.no-read", fmt::format("READ %{} outside the orchestration", r->var));
        if (r->memref < 0 || r->memref >= static_cast<int>(memrefs.size()))
          fail("read.memref", fmt::format("READ %{} names memref {}, which does not exist", r->var, r->memref));
        const MemRef& m = memrefs[static_cast<size_t>(r->memref)];
        if (m.kind != MemKind::Input)
          fail("read.input", fmt::format("READ %{} reads %{}, which is not an input of the program", r->var, m.name));
        if (r->index.size() != m.shape.size())
          fail("read.rank", fmt::format("READ %{} gives {} indices for %{} of rank {}", r->var, r->index.size(), m.name,
                                        m.shape.size()));
        for (const Expr& e : r->index) check_expr(e, "READ index");
        if (scope.count(r->var)) fail("read.shadow", fmt::format("READ %{} shadows a variable in scope", r->var));
        scope.insert(r->var);
        bound_here.push_back(r->var);
      } else {
        check_call(std::get<Call>(s.node));
      }
    }
    for (const std::string& v : bound_here) scope.erase(v);
  }
};

void check_tiles_unique(const std::vector<TileDecl>& tiles) {
  std::set<int> ids;
  for (const auto& t : tiles) {
    if (!ids.insert(t.id).second) fail("tile.unique", fmt::format("tile id {} declared twice", t.id));
    for (int64_t d : t.shape)
      if (d <= 0) fail("tile.shape", fmt::format("tile %{} has non-positive dim", t.name));
  }
}

void check_ids(const std::vector<MemRef>& memrefs, const std::vector<int>& ids, const char* what) {
  for (int id : ids)
    if (id < 0 || id >= static_cast<int>(memrefs.size())) fail("memref.exists", fmt::format("{} names memref {} which does not exist", what, id));
}

}  // namespace

void verify(const TensorGraph& g) {
  std::set<int> defined;
  for (int p : g.params) {
    if (p < 0 || p >= static_cast<int>(g.values.size())) fail("tensor.value-exists", fmt::format("parameter id {} does not exist", p));
    defined.insert(p);
  }
  for (size_t i = 0; i < g.ops.size(); ++i) {
    const TensorOp& op = g.ops[i];
    const OpInfo& info = op_info(op.kind);
    size_t arity = info.cls == OpClass::Where ? 3
                   : info.cls == OpClass::Scatter ? 3
                   // Attention: q, kt, v and an optional additive mask
                   : info.cls == OpClass::Attention ? (op.operands.size() == 4 ? 4 : 3)
                   : info.cls == OpClass::Binary || info.cls == OpClass::Assemble || info.cls == OpClass::Matmul ||
                           info.cls == OpClass::Gather || info.cls == OpClass::Conv
                       ? 2
                   // Full: its value; Random: its block base when not 0 (a symbolic operand)
                   : info.cls == OpClass::Create
                       ? (op.kind == TensorOpKind::Full ? 1
                          : op.kind == TensorOpKind::Random ? std::min<size_t>(op.operands.size(), 1) : 0)
                       : 1;
    size_t tensors = 0;
    for (const Operand& o : op.operands) tensors += o.is_tensor();
    bool creates = info.cls == OpClass::Create;
    if (op.operands.size() != arity || tensors != op.inputs.size() || (tensors == 0) != creates)
      fail("tensor.arity", fmt::format("op {} ({}) has {} operands ({} tensors, {} inputs), expected {}", i, info.name,
                                       op.operands.size(), tensors, op.inputs.size(), arity));
    for (int in : op.inputs)
      if (!defined.count(in)) fail("tensor.use-before-def", fmt::format("op {} ({}) reads value {} before it is defined", i, info.name, in));
    if (op.output < 0 || op.output >= static_cast<int>(g.values.size())) fail("tensor.value-exists", fmt::format("op {} output {} does not exist", i, op.output));
    bool writes_existing = info.cls == OpClass::Assemble || info.cls == OpClass::Scatter;  // writes an existing tensor
    if (info.cls == OpClass::Scatter) {
      if (op.inputs.size() != 3 || op.output != op.inputs[2])
        fail("tensor.scatter", fmt::format("op {} (scatter) must write the tensor it takes as its third input", i));
    } else if (writes_existing) {
      if (op.inputs.size() != 2 || op.output != op.inputs[1] || !g.value(op.output).view)
        fail("tensor.assemble", fmt::format("op {} (assemble) must write the view it takes as its second input", i));
    } else if (!defined.insert(op.output).second) {
      fail("tensor.ssa", fmt::format("value {} is defined twice", op.output));
    }
    if (info.cls == OpClass::View) {
      const TensorValue& v = g.value(op.output);
      if (!v.view || v.view->base != op.inputs[0])
        fail("tensor.view", fmt::format("op {} ({}) defines value {} without its view of value {}", i, info.name, op.output, op.inputs[0]));
      continue;  // views move no data: no tile shape
    }
    if (info.cls == OpClass::Matmul) {
      if (op.cube_tile.size() != 3) fail("tensor.cube-tile", fmt::format("op {} (matmul) has no m, k, n cube tile", i));
      continue;
    }
    if (info.cls == OpClass::Conv) {
      const auto& x = g.value(op.inputs[0]).shape;
      const auto& w = g.value(op.inputs[1]).shape;
      const auto& o = g.value(op.output).shape;
      bool ok = op.conv.size() == 4 && op.cube_tile.size() == 3 && x.size() == 4 && w.size() == 2 && o.size() == 4 &&
                o[0].equals(x[0]) && o[1].equals(w[0]);
      for (size_t d = 0; ok && d < 4; ++d) ok = op.conv[d] > 0 && (d == 3 || op.cube_tile[d] > 0);
      if (ok) {
        auto cin = x[1].as_const(), hp = x[2].as_const(), wp = x[3].as_const(), k = w[1].as_const();
        auto oh = o[2].as_const(), ow = o[3].as_const();
        ok = cin && hp && wp && k && oh && ow && *k == op.conv[0] * op.conv[1] * *cin &&
             *oh == *hp - op.conv[2] * (op.conv[0] - 1) && *ow == *wp - op.conv[3] * (op.conv[1] - 1);
      }
      if (!ok)
        fail("tensor.conv", fmt::format("op {} (conv2d_tiles) has input {}, weight {}, out {}, geometry {} and tile {}; "
                                        "expected [N, Cin, Hp, Wp], [Cout, kh kw Cin], [N, Cout, Hp - dh (kh - 1), "
                                        "Wp - dw (kw - 1)], (kh, kw, dh, dw) and 3 positive tile sizes",
                                        i, shape_str(x), shape_str(w), shape_str(o), ints_str(op.conv),
                                        ints_str(op.cube_tile)));
      continue;
    }
    if (info.cls == OpClass::Attention) {
      if (op.cube_tile.size() != 3) fail("tensor.cube-tile", fmt::format("op {} (attention) has no block sizes", i));
      const auto& q = g.value(op.inputs[0]).shape;
      const auto& kt = g.value(op.inputs[1]).shape;
      const auto& v = g.value(op.inputs[2]).shape;
      const auto& o = g.value(op.output).shape;
      size_t r = q.size();
      // A leading dim of kt, v or the mask is q's or 1 (shared by a group of query heads).
      auto leading = [&](const Expr& x, size_t d) {
        auto c = x.as_const();
        return x.equals(q[d]) || (c && *c == 1);
      };
      bool ok = r >= 2 && kt.size() == r && v.size() == r && o.size() == r && q[r - 1].equals(kt[r - 2]) &&
                kt[r - 1].equals(v[r - 2]) && o[r - 2].equals(q[r - 2]) && o[r - 1].equals(v[r - 1]);
      for (size_t d = 0; ok && d + 2 < r; ++d) ok = leading(kt[d], d) && leading(v[d], d) && q[d].equals(o[d]);
      if (!ok)
        fail("tensor.attention", fmt::format("op {} (attention) has shapes q {}, kt {}, v {}, out {}; expected [.., S, D], "
                                             "[.., D, T], [.., T, Dv] and [.., S, Dv]",
                                             i, shape_str(q), shape_str(kt), shape_str(v), shape_str(o)));
      if (op.inputs.size() == 4) {
        const auto& mk = g.value(op.inputs[3]).shape;
        size_t rm = mk.size();
        bool mask_ok = rm >= 2 && rm <= r && mk[rm - 2].equals(q[r - 2]) && mk[rm - 1].equals(kt[r - 1]);
        for (size_t d = 0; mask_ok && d + 2 < rm; ++d) mask_ok = leading(mk[d], d + (r - rm));
        if (!mask_ok)
          fail("tensor.attention", fmt::format("op {} (attention) has a mask of shape {}; expected [.., S, T] = "
                                               "[.., {}, {}] with leading dims 1 or q's",
                                               i, shape_str(mk), q[r - 2].str(), kt[r - 1].str()));
      }
      continue;
    }
    size_t iter_rank = info.cls == OpClass::Reduce  ? g.value(op.inputs[0]).shape.size()
                       : info.cls == OpClass::Scatter ? g.value(op.inputs[0]).shape.size()
                                                      : g.value(op.output).shape.size();
    if (op.tile_shape.size() != iter_rank)
      fail("tensor.tile-rank", fmt::format("op {} ({}) has tile shape of rank {}, expected {}", i, info.name, op.tile_shape.size(), iter_rank));
    if (info.cls == OpClass::Reduce || info.cls == OpClass::Scan) {
      std::vector<int> dims = op.dims.empty() ? std::vector<int>{op.dim} : op.dims;
      for (int d : dims)
        if (d < 0 || d >= static_cast<int>(iter_rank))
          fail("tensor.reduce-dim", fmt::format("op {} ({}) reduces dim {} of a rank-{} tensor", i, info.name, d, iter_rank));
    }
  }
  for (int o : g.outputs)
    if (!defined.count(o)) fail("tensor.use-before-def", fmt::format("output value {} is never defined", o));
}

namespace {
/// The variables of the reads made at top level or in a region enclosing `region`.
void add_read_scope(std::set<std::string>& scope, const std::vector<ScalarRead>& reads,
                    const std::vector<Region>& regions, int region) {
  const std::vector<int> path = region_path(regions, region);
  for (const ScalarRead& r : reads)
    if (r.region < 0 || std::find(path.begin(), path.end(), r.region) != path.end()) scope.insert(r.var);
}
}  // namespace

void verify(const TileGraph& g) {
  check_tiles_unique(g.tiles);
  check_ids(g.memrefs, g.params, "params");
  check_ids(g.memrefs, g.outputs, "outputs");
  for (const MemRef& m : g.memrefs)
    if (m.kind == MemKind::Local) fail("tile.no-local", fmt::format("memref %{} is local before blocks exist", m.name));
  StmtChecker c{g.memrefs, g.tiles, nullptr};
  for (const TileNest& n : g.nests) {
    c.defined_tiles.clear();
    c.scope.clear();
    for (const auto& d : g.dyn_dims) c.scope.insert(d);
    for (int r : region_path(g.regions, n.region))
      if (g.regions[r].kind == Region::Kind::Loop) c.scope.insert(g.regions[r].var);
    add_read_scope(c.scope, g.reads, g.regions, n.region);
    c.check(n.body);
  }
}

namespace {
/// Every tile a TLOAD ... panels=W writes is written only by such loads and read only as the b
/// operand of matmuls that take panels of the same width, and a matmul's b in panels comes from such
/// loads: the two sides agree on the layout, which nothing else reads.
void check_panel_layouts(const InCoreFunction& f) {
  std::map<int, int64_t> layout;  // tile -> width of the panels its writers lay it out in (0: rows)
  std::vector<const Instr*> seq;
  for_each_instr(f.body, [&](const Instr& in) { seq.push_back(&in); });
  auto name = [&](int id) {
    for (const TileDecl& t : f.tiles)
      if (t.id == id) return t.name;
    return std::to_string(id);
  };
  for (const Instr* in : seq) {
    if (in->dst < 0 || writes_memory(in->op)) continue;
    const int64_t w = in->op == Opcode::TLOAD ? in->panels : 0;
    auto [it, fresh] = layout.emplace(in->dst, w);
    if (!fresh && it->second != w)
      fail("tile.layout", fmt::format("@{}: tile %{} is written in panels of {} and of {} columns", f.name,
                                      name(in->dst), it->second, w));
  }
  for (const Instr* in : seq) {
    const bool mm = in->op == Opcode::TMATMUL || in->op == Opcode::TMATMUL_ACC;
    const size_t b = in->op == Opcode::TMATMUL_ACC ? 2 : 1;
    for (size_t i = 0; i < in->srcs.size(); ++i) {
      auto it = layout.find(in->srcs[i]);
      const int64_t have = it == layout.end() ? 0 : it->second;
      const int64_t want = mm && i == b ? in->panels : 0;
      if (have != want)
        fail("tile.layout", fmt::format("@{}: {} reads tile %{} {} but it is laid out {}", f.name,
                                        opcode_name(in->op), name(in->srcs[i]),
                                        want > 0 ? fmt::format("in panels of {} columns", want) : std::string("by rows"),
                                        have > 0 ? fmt::format("in panels of {} columns", have) : std::string("by rows")));
    }
  }
}

/// A tile some load views with its source's row pitch (tload ... view strided) is read only as an
/// operand (a or b, not the accumulator) of matmuls of bf16 operands: only their kernels take a pitch.
void check_strided_views(const InCoreFunction& f) {
  std::set<int> strided;
  std::vector<const Instr*> seq;
  for_each_instr(f.body, [&](const Instr& in) {
    seq.push_back(&in);
    if (in.op == Opcode::TLOAD && in.strided) strided.insert(in.dst);
  });
  if (strided.empty()) return;
  auto decl = [&](int id) -> const TileDecl* {
    for (const TileDecl& t : f.tiles)
      if (t.id == id) return &t;
    return nullptr;
  };
  // A rank-2 (or more) bf16 tile, as the pass views strided; anything else reads no pitch.
  auto dtype = [&](int id) {
    const TileDecl* t = decl(id);
    return t != nullptr && t->shape.size() >= 2 ? t->dtype : DataType::FP32;
  };
  for (const Instr* in : seq) {
    for (size_t i = 0; i < in->srcs.size(); ++i) {
      if (!strided.count(in->srcs[i])) continue;
      const TileDecl* t = decl(in->srcs[i]);
      if (!reads_with_row_pitch(*in, i, dtype))
        fail("tile.strided", fmt::format("@{}: {} reads tile %{}, which a load views strided: only the operands of a "
                                         "matmul of two bf16 tiles may be read with their source's row pitch",
                                         f.name, opcode_name(in->op), t ? t->name : std::to_string(in->srcs[i])));
    }
  }
}

void verify_function(const InCoreFunction& f, const std::vector<MemRef>& memrefs) {
  check_tiles_unique(f.tiles);
  std::set<int> visible(f.locals.begin(), f.locals.end());
  for (const RegionParam& p : f.params) {
    if (p.memref < 0 || p.memref >= static_cast<int>(memrefs.size())) fail("memref.exists", fmt::format("@{} param %{} binds no memref", f.name, p.name));
    if (memrefs[p.memref].kind == MemKind::Local) fail("function.param-local", fmt::format("@{} param %{} binds a local buffer", f.name, p.name));
    if (p.max_extents.size() != memrefs[p.memref].shape.size())
      fail("memref.rank", fmt::format("@{} param %{} has the wrong rank", f.name, p.name));
    visible.insert(p.memref);
  }
  for (int l : f.locals)
    if (l < 0 || l >= static_cast<int>(memrefs.size()) || memrefs[l].kind != MemKind::Local)
      fail("function.local", fmt::format("@{} owns memref {} which is not a local buffer", f.name, l));
  StmtChecker c{memrefs, f.tiles, [&](int id) { return visible.count(id) > 0; }};
  c.allow_if = true;
  c.allow_fused = true;
  for (const auto& s : f.scalar_params) c.scope.insert(s);
  // An InCore function sees its own scalars only (not the caller's dynamic dims): the
  // orchestration passes it what it needs.
  c.check(f.body);
  check_panel_layouts(f);
  check_strided_views(f);
  // Stores into inputs would race with other readers of the caller's tensors.
  for_each_instr(f.body, [&](const Instr& in) {
    if (!writes_memory(in.op)) return;
    for (const RegionParam& p : f.params)
      if (p.memref == in.memref && !p.is_output)
        fail("function.store-to-input", fmt::format("@{} stores into input parameter %{}", f.name, p.name));
  });
  // An accumulator parameter is only added into: a plain access would race with the other calls
  // adding into the same region, which the runtime does not order against it.
  for (const RegionParam& p : f.params) {
    if (!p.accumulate) continue;
    if (!p.is_output) fail("function.accum", fmt::format("@{}: accumulator parameter %{} is not an output", f.name, p.name));
    if (!accumulates_only(f.body, p.memref))
      fail("function.accum", fmt::format("@{}: accumulator parameter %{} is accessed otherwise than by atomic_add stores",
                                         f.name, p.name));
  }
}
}  // namespace

void verify(const BlockGraph& g) {
  check_ids(g.memrefs, g.params, "params");
  check_ids(g.memrefs, g.outputs, "outputs");
  for (const InCoreFunction& f : g.functions) verify_function(f, g.memrefs);
  for (const BlockLaunch& l : g.launches) {
    StmtChecker c{g.memrefs, {}, [&](int id) { return g.memrefs[id].kind != MemKind::Local; }};
    c.allow_instr = false;
    c.allow_call = true;
    c.allow_if = true;
    c.functions = &g.functions;
    for (const auto& d : g.dyn_dims) c.scope.insert(d);
    for (int r : region_path(g.regions, l.region))
      if (g.regions[r].kind == Region::Kind::Loop) c.scope.insert(g.regions[r].var);
    add_read_scope(c.scope, g.reads, g.regions, l.region);
    for (const Loop& gl : l.grid) {
      if (!gl.parallel) fail("block.grid-parallel", fmt::format("grid loop %{} is not parallel", gl.var));
      c.scope.insert(gl.var);
    }
    if (l.call.callee != l.function) fail("call.callee", "launch calls a different function than it launches");
    c.check({Stmt{l.call}});
  }
}

void verify(const ExecutionGraph& g) {
  check_ids(g.memrefs, g.params, "params");
  check_ids(g.memrefs, g.outputs, "outputs");
  for (const InCoreFunction& f : g.functions) verify_function(f, g.memrefs);
  StmtChecker c{g.memrefs, {}, [&](int id) { return g.memrefs[id].kind != MemKind::Local; }};
  c.allow_instr = false;
  c.allow_call = true;
  c.allow_if = true;
  c.functions = &g.functions;
  for (const auto& d : g.dyn_dims) c.scope.insert(d);
  c.check(g.orchestration);
}

}  // namespace pypto
