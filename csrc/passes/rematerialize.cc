// Pass "rematerialize": trade recomputation for buffer space.
//
// Requires: a verified Block Graph after fuse_loops and forward_tiles.
// Guarantees: in an InCore function whose arena, as plan_buffers would lay it
// out (planned_arena_bytes), exceeds the buffer budget, a local buffer written once, inside a loop, by a chain
// of elementwise instructions over read-only memory and tiles that are final
// before that loop, is no longer kept: every later load of it (at the same
// box, in another loop with the same bounds) recomputes the chain instead,
// and the buffer is dropped. This is softmax's "recompute exp(x - max) in the
// last loop instead of keeping a row block of it" when the row block does not
// fit. Largest buffers go first; the pass stops once the function fits.
#include "passes/rematerialize.h"

#include <algorithm>
#include <functional>

#include "ir/errors.h"
#include "passes/plan_buffers.h"
#include "passes/util.h"

namespace pypto {

namespace {

bool is_elementwise(const Instr& in) {
  if (in.op == Opcode::TLOAD) return true;
  if (writes_memory(in.op) || in.op == Opcode::TGATHER || is_reduction(in.op) || in.op == Opcode::TFILL ||
      in.op == Opcode::TARANGE || in.op == Opcode::TRANDOM || in.op == Opcode::TMATMUL || in.op == Opcode::TMATMUL_ACC)
    return false;
  return in.dst >= 0 && std::find(in.srcs.begin(), in.srcs.end(), in.dst) == in.srcs.end();
}

class Remat {
 public:
  Remat(InCoreFunction& f, const std::vector<MemRef>& memrefs, int64_t budget, bool reuse)
      : f_(f), memrefs_(memrefs), budget_(budget), reuse_(reuse) {}

  void run() {
    std::vector<int> locals = f_.locals;
    std::sort(locals.begin(), locals.end(),
              [&](int a, int b) { return bytes_of(a) > bytes_of(b); });
    for (int l : locals) {
      if (estimate() <= budget_) return;
      if (local_is_dynamic(memrefs_[l])) continue;
      try_local(l);
    }
  }

 private:
  int64_t bytes_of(int l) const { return local_is_dynamic(memrefs_[l]) ? 0 : local_bytes(memrefs_[l]); }

  /// The arena plan_buffers would give the function as it stands.
  int64_t estimate() const { return planned_arena_bytes(f_, memrefs_, reuse_); }

  std::set<int> written_memrefs() const {
    std::set<int> w;
    for_each_instr(f_.body, [&](const Instr& in) {
      if (writes_memory(in.op)) w.insert(in.memref);
    });
    return w;
  }

  void try_local(int l) {
    // Find the single store and the top-level loop that holds it.
    int stores = 0;
    bool atomic = false;  // an atomic addition's result is not its tile's
    for_each_instr(f_.body, [&](const Instr& in) {
      stores += writes_memory(in.op) && in.memref == l;
      atomic = atomic || (in.atomic && in.memref == l);
    });
    if (stores != 1 || atomic) return;
    size_t a_idx = f_.body.size();
    for (size_t i = 0; i < f_.body.size(); ++i) {
      const Loop* lp = std::get_if<Loop>(&f_.body[i].node);
      if (!lp) continue;
      bool has = false;
      for_each_instr(lp->body, [&](const Instr& in) { has |= in.op == Opcode::TSTORE && in.memref == l; });
      if (has) a_idx = i;
    }
    if (a_idx == f_.body.size()) return;
    const Loop& A = std::get<Loop>(f_.body[a_idx].node);
    // The chain: instructions of A's top-level body up to the store.
    const Instr* store = nullptr;
    std::vector<const Instr*> body;
    for (const Stmt& s : A.body) {
      const Instr* in = std::get_if<Instr>(&s.node);
      if (!in) continue;
      if (in->op == Opcode::TSTORE && in->memref == l) {
        store = in;
        break;
      }
      body.push_back(in);
    }
    if (!store) return;
    // Collect the chain backwards from the stored tile.
    std::set<int> defined_in_a;
    for (const Instr* in : body)
      if (in->dst >= 0) defined_in_a.insert(in->dst);
    std::set<int> written = written_memrefs();
    std::vector<const Instr*> chain;
    std::set<int> need = {store->srcs[0]};
    for (auto it = body.rbegin(); it != body.rend(); ++it) {
      const Instr* in = *it;
      if (!need.count(in->dst)) continue;
      if (!is_elementwise(*in)) return;
      if (in->op == Opcode::TLOAD && (written.count(in->memref) || memrefs_[in->memref].kind == MemKind::Local)) return;
      chain.push_back(in);
      need.erase(in->dst);
      for (int s : in->srcs) need.insert(s);
    }
    // What the chain reads from outside must be final before A (not written in or after A).
    for (int t : need) {
      if (defined_in_a.count(t)) return;
      bool later = false;
      for (size_t i = a_idx; i < f_.body.size(); ++i)
        for_each_instr(std::vector<Stmt>{f_.body[i]}, [&](const Instr& in) { later |= in.dst == t; });
      if (later) return;
    }
    std::reverse(chain.begin(), chain.end());
    // Replace each load of l in a later top-level loop with a recomputation.
    bool all = true;
    for (size_t i = a_idx + 1; i < f_.body.size(); ++i) {
      Loop* B = std::get_if<Loop>(&f_.body[i].node);
      if (!B) {
        bool uses = false;
        for_each_instr(std::vector<Stmt>{f_.body[i]}, [&](const Instr& in) { uses |= reads_memory(in.op) && in.memref == l; });
        all &= !uses;
        continue;
      }
      all &= rewrite_loop(*B, A, l, *store, chain);
    }
    if (!all) return;
    // Drop the store and the buffer; the chain stays for A's other uses.
    std::vector<Stmt>& ab = std::get<Loop>(f_.body[a_idx].node).body;
    ab.erase(std::remove_if(ab.begin(), ab.end(), [&](const Stmt& s) {
               const Instr* in = std::get_if<Instr>(&s.node);
               return in && in->op == Opcode::TSTORE && in->memref == l;
             }),
             ab.end());
    f_.locals.erase(std::remove(f_.locals.begin(), f_.locals.end(), l), f_.locals.end());
    drop_unused();
  }

  bool rewrite_loop(Loop& B, const Loop& A, int l, const Instr& store, const std::vector<const Instr*>& chain) {
    bool ok = true;
    std::vector<Stmt> out;
    for (Stmt& s : B.body) {
      Instr* in = std::get_if<Instr>(&s.node);
      if (!in || in->op != Opcode::TLOAD || in->memref != l) {
        if (!in) {
          bool uses = false;
          for_each_instr(std::vector<Stmt>{s}, [&](const Instr& x) { uses |= reads_memory(x.op) && x.memref == l; });
          ok &= !uses;
        }
        out.push_back(s);
        continue;
      }
      if (!B.start.equals(A.start) || !B.stop.equals(A.stop) || !B.step.equals(A.step)) {
        ok = false;
        out.push_back(s);
        continue;
      }
      // The load must read exactly the box the store wrote, in the same iteration.
      std::vector<Stmt> probe = {Stmt{*in}};
      substitute(probe, {{B.var, Expr::var(A.var)}});
      const Instr& ld = std::get<Instr>(probe[0].node);
      bool same = ld.offsets.size() == store.offsets.size() && ld.valid.size() == store.valid.size();
      for (size_t d = 0; same && d < ld.offsets.size(); ++d) same = ld.offsets[d].equals(store.offsets[d]);
      for (size_t d = 0; same && d < ld.valid.size(); ++d) same = ld.valid[d].equals(store.valid[d]);
      if (!same) {
        ok = false;
        out.push_back(s);
        continue;
      }
      // Clone the chain with fresh tiles, the loop variable renamed to B's.
      std::map<int, int> fresh;
      for (const Instr* c : chain) {
        Instr copy = *c;
        for (int& t : copy.srcs)
          if (fresh.count(t)) t = fresh[t];
        const TileDecl& d = tile(c->dst);
        TileDecl nt = d;
        nt.id = next_tile_id();
        nt.name = "t" + std::to_string(nt.id);
        f_.tiles.push_back(nt);
        fresh[c->dst] = nt.id;
        copy.dst = nt.id;
        std::vector<Stmt> one = {Stmt{copy}};
        substitute(one, {{A.var, Expr::var(B.var)}});
        out.push_back(one[0]);
      }
      rename_[in->dst] = fresh.at(store.srcs[0]);
    }
    B.body = std::move(out);
    for_each_instr(B.body, [&](Instr& x) {
      for (int& t : x.srcs)
        if (rename_.count(t)) t = rename_[t];
    });
    return ok;
  }

  const TileDecl& tile(int id) const {
    for (const TileDecl& t : f_.tiles)
      if (t.id == id) return t;
    throw InternalError("rematerialize: unknown tile");
  }

  int next_tile_id() const {
    int m = -1;
    for (const TileDecl& t : f_.tiles) m = std::max(m, t.id);
    return m + 1;
  }

  void drop_unused() {
    std::set<int> used = tiles_of(f_.body);
    f_.tiles.erase(std::remove_if(f_.tiles.begin(), f_.tiles.end(), [&](const TileDecl& t) { return !used.count(t.id); }),
                   f_.tiles.end());
  }

  InCoreFunction& f_;
  const std::vector<MemRef>& memrefs_;
  int64_t budget_;
  bool reuse_;
  std::map<int, int> rename_;
};

}  // namespace

BlockGraph Rematerialize(const BlockGraph& g, const PassOptions& opts) {
  BlockGraph out = g;
  for (InCoreFunction& f : out.functions) Remat(f, out.memrefs, buffer_budget_bytes(opts), !opts.disabled.count("plan_buffers")).run();
  return out;
}

}  // namespace pypto
