// Pass "forward_tiles": keep fused intermediates in tiles.
//
// Requires: a verified Block Graph (TLOAD destinations are defined once).
// Guarantees: a TLOAD of exactly the box a preceding TSTORE wrote (same
// memref, offsets and valid extents, no other store to that memref and no
// rewrite of the stored tile in between, in the same loop iteration or an
// enclosing scope) is removed and its uses read the stored tile. So is a
// TLOAD of exactly the box an earlier TLOAD of a product's operand loaded (two
// products of one operand, the gate and up projections of one block of
// tokens), with no store to memory other than the function's own local
// buffers and no rewrite of the tile in between, where the function's arena
// (as plan_buffers would lay it out) then stays within the buffer budget or
// does not grow. Local buffers nobody loads
// any more lose their stores and are dropped, then instructions whose result
// is never read, and tiles no instruction uses.
#include "passes/forward_tiles.h"

#include <functional>

#include "passes/plan_buffers.h"
#include "passes/util.h"

namespace pypto {

namespace {

struct Entry {
  int memref;
  std::vector<Expr> offsets, valid;
  int tile;
  bool loaded = false;  ///< the box a TLOAD read (memory unchanged since), not one a TSTORE wrote
};

bool same_exprs(const std::vector<Expr>& a, const std::vector<Expr>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!a[i].equals(b[i])) return false;
  return true;
}

class Forwarder {
 public:
  /// With `loads`, loads of products' operands are forwarded too.
  Forwarder(InCoreFunction& f, bool loads) : f_(f) {
    if (loads)
      for_each_instr(f_.body, [&](const Instr& in) {
        if (in.op == Opcode::TMATMUL || in.op == Opcode::TMATMUL_ACC) operands_.insert(in.srcs.begin(), in.srcs.end());
      });
  }

  /// Loads forwarded from an earlier load.
  int forwarded_loads() const { return forwarded_loads_; }

  void run() {
    std::vector<Entry> avail;
    walk(f_.body, avail);
    // Rename forwarded loads everywhere (their destinations were defined once).
    for_each_instr(f_.body, [&](Instr& in) {
      for (int& s : in.srcs) s = resolve(s);
    });
    eliminate_dead();
  }

 private:
  int resolve(int t) const {
    auto it = rename_.find(t);
    return it == rename_.end() ? t : resolve(it->second);
  }

  const TileDecl* tile(int id) const {
    for (const auto& t : f_.tiles)
      if (t.id == id) return &t;
    return nullptr;
  }

  static void kill_tile(std::vector<Entry>& avail, int t) {
    avail.erase(std::remove_if(avail.begin(), avail.end(), [&](const Entry& e) { return e.tile == t; }), avail.end());
  }
  bool is_local(int m) const { return std::find(f_.locals.begin(), f_.locals.end(), m) != f_.locals.end(); }

  // Another memref may alias a stored one (not a function's own local buffer): after such a
  // store, what a load read is no longer known.
  static void kill_loaded(std::vector<Entry>& avail) {
    avail.erase(std::remove_if(avail.begin(), avail.end(), [](const Entry& e) { return e.loaded; }), avail.end());
  }
  static void kill_memref(std::vector<Entry>& avail, int m) {
    avail.erase(std::remove_if(avail.begin(), avail.end(), [&](const Entry& e) { return e.memref == m; }), avail.end());
  }

  void walk(std::vector<Stmt>& body, std::vector<Entry>& avail) {
    for (size_t i = 0; i < body.size(); ++i) {
      Stmt& s = body[i];
      if (auto* l = std::get_if<Loop>(&s.node)) {
        // What the loop writes is not available inside it (later iterations) nor after it.
        std::set<int> stored_mems, written_tiles;
        for_each_instr(l->body, [&](const Instr& in) {
          if (writes_memory(in.op)) stored_mems.insert(in.memref);
          if (in.dst >= 0) written_tiles.insert(in.dst);
        });
        for (int m : stored_mems) kill_memref(avail, m);
        if (std::any_of(stored_mems.begin(), stored_mems.end(), [&](int m) { return !is_local(m); })) kill_loaded(avail);
        for (int t : written_tiles) kill_tile(avail, resolve(t));
        std::vector<Entry> inner = avail;
        walk(l->body, inner);
        continue;
      }
      Instr* in = std::get_if<Instr>(&s.node);
      if (!in) continue;
      for (int& src : in->srcs) src = resolve(src);
      if (in->op == Opcode::TLOAD) {
        const TileDecl* dt = tile(in->dst);
        bool forwarded = false;
        for (const Entry& e : avail) {
          const TileDecl* st = tile(e.tile);
          if (e.memref == in->memref && same_exprs(e.offsets, in->offsets) && same_exprs(e.valid, in->valid) && dt &&
              st && dt->shape == st->shape && dt->dtype == st->dtype) {
            rename_[in->dst] = e.tile;
            forwarded_loads_ += e.loaded ? 1 : 0;
            body.erase(body.begin() + i);
            --i;
            forwarded = true;
            break;
          }
        }
        if (forwarded) continue;
      }
      if (in->dst >= 0) kill_tile(avail, in->dst);
      if (writes_memory(in->op)) {
        kill_memref(avail, in->memref);
        if (!is_local(in->memref)) kill_loaded(avail);
      }
      if (in->op == Opcode::TLOAD && operands_.count(in->dst))
        avail.push_back(Entry{in->memref, in->offsets, in->valid, in->dst, true});
      // After an atomic addition the memory holds a sum, not the stored tile.
      if (in->op == Opcode::TSTORE && !in->atomic) avail.push_back(Entry{in->memref, in->offsets, in->valid, in->srcs[0]});
    }
  }

  void eliminate_dead() {
    std::set<int> loaded;
    for_each_instr(f_.body, [&](const Instr& in) {
      if (reads_memory(in.op)) loaded.insert(in.memref);
    });
    std::set<int> dead_locals;
    for (int l : f_.locals)
      if (!loaded.count(l)) dead_locals.insert(l);
    f_.locals.erase(std::remove_if(f_.locals.begin(), f_.locals.end(), [&](int l) { return dead_locals.count(l) > 0; }),
                    f_.locals.end());
    bool changed = true;
    while (changed) {
      changed = false;
      std::set<int> read;
      for_each_instr(f_.body, [&](const Instr& in) { read.insert(in.srcs.begin(), in.srcs.end()); });
      std::function<void(std::vector<Stmt>&)> sweep = [&](std::vector<Stmt>& body) {
        for (size_t i = 0; i < body.size(); ++i) {
          if (auto* l = std::get_if<Loop>(&body[i].node)) {
            sweep(l->body);
            if (l->body.empty()) {
              body.erase(body.begin() + i--);
              changed = true;
            }
            continue;
          }
          Instr& in = std::get<Instr>(body[i].node);
          bool dead = writes_memory(in.op) ? dead_locals.count(in.memref) > 0 : !read.count(in.dst);
          if (dead) {
            body.erase(body.begin() + i--);
            changed = true;
          }
        }
      };
      sweep(f_.body);
    }
    std::set<int> used = tiles_of(f_.body);
    f_.tiles.erase(std::remove_if(f_.tiles.begin(), f_.tiles.end(), [&](const TileDecl& t) { return !used.count(t.id); }),
                   f_.tiles.end());
  }

  InCoreFunction& f_;
  int forwarded_loads_ = 0;
  std::set<int> operands_;  ///< tiles the products read (with `loads`)
  std::map<int, int> rename_;
};

}  // namespace

BlockGraph ForwardTiles(const BlockGraph& g, const PassOptions& opts) {
  BlockGraph out = g;
  const bool reuse = !opts.disabled.count("plan_buffers");
  for (InCoreFunction& f : out.functions) {
    // A forwarded load keeps the first tile live up to the second one's last use. Where that takes
    // the arena past the budget (and it grows), the pipeline would cut the function's fusion,
    // which costs more than the copy (a bf16 block of MoE experts in three tasks instead of one):
    // the loads are kept there.
    InCoreFunction with_loads = f;
    Forwarder fl(with_loads, true);
    fl.run();
    if (fl.forwarded_loads() > 0) {
      const int64_t bytes = planned_arena_bytes(with_loads, out.memrefs, reuse);
      if (bytes > buffer_budget_bytes(opts)) {
        Forwarder(f, false).run();
        if (bytes > planned_arena_bytes(f, out.memrefs, reuse)) continue;
      }
    }
    f = std::move(with_loads);
  }
  // A local buffer nothing loads any more has left its function's `locals` (eliminate_dead); its
  // memref stays in the graph's list, unused.
  return out;
}

}  // namespace pypto
