// Pass "fuse_loops": loop fusion inside InCore functions.
//
// Requires: a verified Block Graph.
// Guarantees: two loops of one statement list with the same bounds merge into
// one when no tile flows between them (an accumulator finished by the first
// loop and read by the second keeps them apart) and every tensor one writes
// and the other touches is accessed at the same box in the same iteration,
// with boxes of different iterations disjoint. Independent instructions
// between the two loops (such as the next accumulator's initialisation) move
// before the first. The result is what the fused producer-consumer chain
// needs: one pass over the data per reduction boundary.
#include "passes/fuse_loops.h"

#include "passes/util.h"

namespace pypto {

namespace {

struct Access {
  const Instr* in;
  bool write;
};

std::vector<Access> accesses(const std::vector<Stmt>& body) {
  std::vector<Access> out;
  for_each_instr(body, [&](const Instr& in) {
    if (reads_memory(in.op)) out.push_back({&in, false});
    if (writes_memory(in.op)) out.push_back({&in, true});
  });
  return out;
}

std::set<int> tiles_written(const std::vector<Stmt>& body) {
  std::set<int> out;
  for_each_instr(body, [&](const Instr& in) {
    if (in.dst >= 0) out.insert(in.dst);
  });
  return out;
}

std::set<int> tiles_read(const std::vector<Stmt>& body) {
  std::set<int> out;
  for_each_instr(body, [&](const Instr& in) { out.insert(in.srcs.begin(), in.srcs.end()); });
  return out;
}

bool intersects(const std::set<int>& a, const std::set<int>& b) {
  for (int x : a)
    if (b.count(x)) return true;
  return false;
}

/// Same box in the same iteration, and the boxes of different iterations are disjoint.
bool same_iteration_box(const Instr& a, const Instr& b, const std::string& var, const std::vector<TileDecl>& tiles) {
  if (a.offsets.size() != b.offsets.size()) return false;
  bool disjoint = false;
  for (size_t e = 0; e < a.offsets.size(); ++e) {
    if (!a.offsets[e].equals(b.offsets[e])) return false;
    const Expr& o = a.offsets[e];
    // offset == var * extent, with the tile exactly `extent` long along e.
    if (o.kind() == Expr::Kind::Mul && o.lhs().is_var() && o.lhs().name() == var && o.rhs().is_const()) {
      int ta = memory_tile(a);
      for (const TileDecl& t : tiles)
        if (t.id == ta && e < t.shape.size() && t.shape[e] == o.rhs().value()) disjoint = true;
    }
  }
  return disjoint;
}

bool can_fuse(const Loop& a, const Loop& b, const std::vector<TileDecl>& tiles) {
  if (!a.start.equals(b.start) || !a.stop.equals(b.stop) || !a.step.equals(b.step)) return false;
  if (intersects(tiles_written(a.body), tiles_read(b.body)) || intersects(tiles_read(a.body), tiles_written(b.body)) ||
      intersects(tiles_written(a.body), tiles_written(b.body)))
    return false;
  std::vector<Stmt> b_renamed = b.body;
  substitute(b_renamed, {{b.var, Expr::var(a.var)}});
  for (const Access& x : accesses(a.body))
    for (const Access& y : accesses(b_renamed)) {
      if (x.in->memref != y.in->memref || (!x.write && !y.write)) continue;
      if (!same_iteration_box(*x.in, *y.in, a.var, tiles)) return false;
    }
  return true;
}

/// Can the instructions between two loops run before the first one?
bool hoistable(const std::vector<Stmt>& between, const Loop& a) {
  std::set<int> touched = tiles_of(a.body);
  std::set<int> mems;
  for (const Access& x : accesses(a.body)) mems.insert(x.in->memref);
  for (const Stmt& s : between) {
    const Instr* in = std::get_if<Instr>(&s.node);
    if (!in) return false;
    if (in->dst >= 0 && touched.count(in->dst)) return false;
    for (int t : in->srcs)
      if (touched.count(t)) return false;
    if ((reads_memory(in->op) || writes_memory(in->op)) && mems.count(in->memref)) return false;
  }
  return true;
}

void fuse_list(std::vector<Stmt>& body, const std::vector<TileDecl>& tiles) {
  for (size_t i = 0; i < body.size(); ++i) {
    if (!std::holds_alternative<Loop>(body[i].node)) continue;
    bool merged = true;
    while (merged) {
      merged = false;
      size_t j = i + 1;
      while (j < body.size() && std::holds_alternative<Instr>(body[j].node)) ++j;
      if (j >= body.size()) break;
      Loop* a = &std::get<Loop>(body[i].node);
      const Loop* b = std::get_if<Loop>(&body[j].node);
      if (!b || !can_fuse(*a, *b, tiles)) break;
      std::vector<Stmt> between(body.begin() + i + 1, body.begin() + j);
      if (!hoistable(between, *a)) break;
      Loop fused = *a;
      std::vector<Stmt> b_body = b->body;
      substitute(b_body, {{b->var, Expr::var(a->var)}});
      fused.body.insert(fused.body.end(), b_body.begin(), b_body.end());
      std::vector<Stmt> rebuilt(body.begin(), body.begin() + i);
      rebuilt.insert(rebuilt.end(), between.begin(), between.end());
      size_t new_i = rebuilt.size();
      rebuilt.push_back(Stmt{std::move(fused)});
      rebuilt.insert(rebuilt.end(), body.begin() + j + 1, body.end());
      body = std::move(rebuilt);
      i = new_i;
      merged = true;
    }
  }
  for (Stmt& s : body)
    if (auto* l = std::get_if<Loop>(&s.node)) fuse_list(l->body, tiles);
}

}  // namespace

BlockGraph FuseLoops(const BlockGraph& g, const PassOptions&) {
  BlockGraph out = g;
  for (InCoreFunction& f : out.functions) fuse_list(f.body, f.tiles);
  return out;
}

}  // namespace pypto
