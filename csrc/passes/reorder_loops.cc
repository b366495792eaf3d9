// Pass "reorder_loops": Tile Graph -> Tile Graph.
//
// Requires: a verified Tile Graph (parallel grid loops outermost in each nest).
// Guarantees: the same results, with producer nests' grid loops reorganised so
// that fuse_blocks can fuse them with the nest that consumes their output:
//  - chunking: a producer grid loop whose tile divides the consumer's tile on
//    the same dim is split into an outer loop over the consumer's tile and an
//    inner loop over the chunks (32-row blocks of 16-row tiles);
//  - interchange: the producer's grid loops that match the consumer's are moved
//    to the front in the consumer's order (an elementwise producer walked by
//    column blocks for a column reduction).
// Grid loops are parallel, so any order and any chunking is legal. Consumers
// are visited from last to first so a chain is aligned back to front; each
// nest is reorganised at most once, and only when that lengthens the common
// grid prefix it shares with its consumer. Each decision is noted on the nest
// (shown in the Tile Graph dump and in dump("passes")).
#include "passes/reorder_loops.h"

#include <fmt/format.h>

#include "passes/util.h"

namespace pypto {

namespace {

std::string loop_str(const Loop& l) { return fmt::format("dim {} tile {}", l.dim, l.tile); }

/// Strip-mines the producer's loops that are finer than the consumer's on the
/// same dim. Returns the chunked grid (or the grid unchanged), adds a note and
/// maps each chunked loop's variable to outer * chunks + inner in `env`.
std::vector<Loop> chunk(const std::vector<Loop>& grid, const std::vector<Loop>& consumer, std::string& note,
                        std::map<std::string, Expr>& env) {
  std::vector<Loop> out;
  for (const Loop& l : grid) {
    const Loop* c = nullptr;
    for (const Loop& cl : consumer)
      if (cl.dim == l.dim) c = &cl;
    bool unit = l.start.as_const() == 0 && l.step.as_const() == 1 && c && c->start.as_const() == 0 &&
                c->step.as_const() == 1;
    if (!unit || l.tile <= 0 || c->tile <= l.tile || c->tile % l.tile != 0) {
      out.push_back(l);
      continue;
    }
    int64_t r = c->tile / l.tile;
    Expr outer_trips = ceildiv(l.stop, Expr(r));
    if (!(outer_trips - c->stop).as_const() || *(outer_trips - c->stop).as_const() != 0) {
      out.push_back(l);
      continue;
    }
    Loop outer = l, inner = l;
    outer.var = l.var + "_o";
    outer.stop = c->stop;
    outer.tile = c->tile;
    inner.var = l.var + "_i";
    auto s = l.stop.as_const();
    inner.stop = s && *s % r == 0 ? Expr(r) : min(Expr(r), l.stop - Expr::var(outer.var) * Expr(r));
    env[l.var] = Expr::var(outer.var) * Expr(r) + Expr::var(inner.var);
    out.push_back(outer);
    out.push_back(inner);
    note += fmt::format("{}chunked {} into {} chunks of {}", note.empty() ? "" : "; ", loop_str(l), r, loop_str(outer));
  }
  return out;
}

/// The grid with the loops matching the consumer's leading grid loops moved
/// to the front, in the consumer's order.
std::vector<Loop> interchange(const std::vector<Loop>& grid, const std::vector<Loop>& consumer) {
  std::vector<Loop> front;
  std::vector<bool> used(grid.size(), false);
  for (const Loop& c : consumer) {
    size_t k = 0;
    while (k < grid.size() && (used[k] || !same_grid_loop(grid[k], c))) ++k;
    if (k == grid.size()) break;
    used[k] = true;
    front.push_back(grid[k]);
  }
  for (size_t k = 0; k < grid.size(); ++k)
    if (!used[k]) front.push_back(grid[k]);
  return front;
}

}  // namespace

TileGraph ReorderLoops(const TileGraph& g, const PassOptions& opts) {
  TileGraph out = g;
  if (!opts.fusion || opts.disabled.count("fuse_blocks")) return out;
  std::vector<NestSplit> splits;
  for (const TileNest& n : g.nests) splits.push_back(split_nest(n));
  std::vector<bool> done(splits.size(), false);
  for (size_t c = splits.size(); c-- > 0;) {
    const NestSplit& cons = splits[c];
    if (!cons.fusible || cons.grid.empty()) continue;
    for (size_t p = c; p-- > 0;) {
      NestSplit& prod = splits[p];
      if (done[p] || !prod.fusible || prod.nest->region != cons.nest->region || !cons.reads.count(prod.produces))
        continue;
      std::string note;
      std::map<std::string, Expr> env;
      std::vector<Loop> grid = chunk(prod.grid, cons.grid, note, env);
      std::vector<Loop> reordered = interchange(grid, cons.grid);
      if (common_prefix(reordered, cons.grid) <= common_prefix(prod.grid, cons.grid)) continue;
      bool moved = false;
      for (size_t k = 0; k < grid.size(); ++k) moved |= grid[k].var != reordered[k].var;
      if (moved) {
        std::vector<std::string> order;
        for (const Loop& l : reordered) order.push_back(fmt::format("({})", loop_str(l)));
        note += fmt::format("{}interchanged grid loops to {}", note.empty() ? "" : "; ", fmt::join(order, ", "));
      }
      std::vector<Stmt> body = prod.body;
      substitute(body, env);
      TileNest& nest = out.nests[p];
      nest.body = wrap_in_grid(reordered, std::move(body));
      nest.note += fmt::format("{}{} to fuse with {}", nest.note.empty() ? "" : "; ", note, cons.nest->name);
      prod.grid = reordered;
      done[p] = true;
    }
  }
  return out;
}

}  // namespace pypto
