// Pass "fuse_blocks": Tile Graph -> Block Graph.
//
// Requires: a verified Tile Graph (parallel grid loops outermost in each nest).
// Guarantees: nests are grouped, in program order, into InCore functions. A
// nest joins the group before it when it consumes a tensor that group
// produces, both share a non-empty common prefix of their outer tile grids
// (same dims, tile sizes and trip counts), and every tensor passed inside the
// group is read block-aligned with how it was written (a consumer reads only
// the block of the grid its producer wrote), and the common grid does not
// shrink to a few tasks where a matmul alone has many more (a one-row norm
// and the matmul over its columns stay apart). The common grid becomes the
// launch grid; the rest of each nest's parallel loops run inside the function.
// A tensor produced and consumed only inside one group and not returned
// becomes a Local buffer holding one block; every other tensor a function
// touches becomes a region parameter, blocked along the grid dims it is
// accessed by. With PassOptions::fusion off, every nest is its own group.
#include "passes/fuse_blocks.h"

#include <fmt/format.h>

#include "ir/errors.h"
#include "passes/util.h"

namespace pypto {

namespace {

std::string grid_var(size_t k) { return fmt::format("g{}", k); }

/// The member's body with its first `len` grid vars renamed to g0.., its
/// remaining grid loops turned into sequential loops around the body.
std::vector<Stmt> member_body(const NestSplit& m, size_t len) {
  std::vector<Stmt> body = m.body;
  for (size_t k = m.grid.size(); k-- > len;) {
    Loop l = m.grid[k];
    l.parallel = false;
    l.body = std::move(body);
    body = {Stmt{std::move(l)}};
  }
  std::map<std::string, Expr> env;
  for (size_t k = 0; k < len; ++k) env[m.grid[k].var] = Expr::var(grid_var(k));
  substitute(body, env);
  return body;
}

std::set<std::string> grid_vars_in(const Expr& e, size_t len) {
  std::set<std::string> out;
  for (const auto& v : vars_of(e))
    for (size_t k = 0; k < len; ++k)
      if (v == grid_var(k)) out.insert(v);
  return out;
}

using Ranges = std::map<std::string, std::pair<int64_t, int64_t>>;

/// Where an access sits in its block of the grid.
struct BlockSpan {
  Expr origin;     ///< the offset with the function's inner loop variables at zero
  int64_t extent;  ///< the block's size: the grid variable's stride
};

/// The block an access at `offset` moving `tile` elements stays inside, when
/// its offset is one grid variable times a stride plus inner loop variables
/// that keep it within that stride (a strip-mined loop's chunks).
std::optional<BlockSpan> block_span(const Expr& offset, int64_t tile, size_t len, const Ranges& ranges) {
  auto gv = grid_vars_in(offset, len);
  if (gv.size() != 1) return std::nullopt;
  std::map<std::string, Expr> zero;
  for (const auto& [v, r] : ranges) zero[v] = Expr(0);
  Expr origin = offset.substitute(zero);
  const std::string& g = *gv.begin();
  auto stride = (origin.substitute({{g, Expr(1)}}) - origin.substitute({{g, Expr(0)}})).as_const();
  if (!stride || *stride <= 0) return std::nullopt;
  auto r = linear_range(offset - origin, ranges);
  if (!r || r->first < 0 || r->second + tile > *stride) return std::nullopt;
  return BlockSpan{origin, *stride};
}

/// The number of tasks of the first `len` loops of a grid, when every trip count is a constant.
std::optional<int64_t> grid_tasks(const std::vector<Loop>& grid, size_t len) {
  int64_t tasks = 1;
  for (size_t k = 0; k < len && k < grid.size(); ++k) {
    auto start = grid[k].start.as_const(), stop = grid[k].stop.as_const(), step = grid[k].step.as_const();
    if (!start || !stop || !step || *step <= 0) return std::nullopt;
    tasks *= std::max<int64_t>(0, (*stop - *start + *step - 1) / *step);
  }
  return tasks;
}

bool has_matmul(const NestSplit& s) {
  bool found = false;
  for_each_instr(s.body, [&](const Instr& in) {
    found |= in.op == Opcode::TMATMUL || in.op == Opcode::TMATMUL_ACC;
  });
  return found;
}

/// Fusing a matmul with a nest on a common grid of a few tasks (the single row of a decode step)
/// when the matmul alone runs as many more tasks (its blocks of columns) would run the product on
/// one core: they stay apart. (An elementwise or reduction nest's columns running inside its row
/// block is what fusion is for: their work is a pass over memory, not a product.) Unknown
/// (symbolic) task counts count as many.
constexpr int64_t kFewTasks = 4;
bool serialises(const std::vector<const NestSplit*>& group, size_t group_len, const NestSplit& s, size_t len) {
  auto fused = grid_tasks(s.grid, len);
  if (!fused || *fused >= kFewTasks) return false;
  auto loses = [&](const std::vector<Loop>& grid, size_t own_len) {
    auto own = grid_tasks(grid, own_len);
    return !own || *own >= kFewTasks * std::max<int64_t>(1, *fused);
  };
  if (has_matmul(s) && loses(s.grid, s.grid.size())) return true;
  for (const NestSplit* m : group)
    if (has_matmul(*m) && loses(m->grid, m->grid.size())) return true;
  return false;
}

bool same_expr(const Expr& a, const Expr& b) { return a.equals(b) || (a - b).as_const() == 0; }

/// Every tensor produced inside the group and read by a later member must be
/// read block-aligned with its store along each grid-indexed dim: the same
/// offsets and tile extents, or accesses inside the same block of the grid.
bool aligned(const std::vector<const NestSplit*>& members, size_t len, const TileGraph& g) {
  std::vector<std::vector<Stmt>> bodies;
  Ranges ranges;
  for (const NestSplit* m : members) {
    bodies.push_back(member_body(*m, len));
    for (const auto& kv : loop_var_ranges(bodies.back())) ranges.insert(kv);
  }
  for (size_t p = 0; p < members.size(); ++p) {
    int mem = members[p]->produces;
    std::vector<const Instr*> stores;
    for_each_instr(bodies[p], [&](const Instr& in) {
      if (writes_memory(in.op) && in.memref == mem) stores.push_back(&in);
    });
    for (size_t c = p + 1; c < members.size(); ++c) {
      if (!members[c]->reads.count(mem)) continue;
      bool ok = true;
      for_each_instr(bodies[c], [&](const Instr& ld) {
        const bool windowed = ld.op == Opcode::TSCATTER && !ld.window.empty();  // updates its box
        if ((!reads_memory(ld.op) && !windowed) || ld.memref != mem) return;
        for (const Instr* st : stores) {
          for (size_t e = 0; e < ld.offsets.size(); ++e) {
            auto gs = grid_vars_in(st->offsets[e], len), gl = grid_vars_in(ld.offsets[e], len);
            int64_t ts = g.tiles[memory_tile(*st)].shape[e], tl = g.tiles[memory_tile(ld)].shape[e];
            if (gs != gl) {
              ok = false;
            } else if (!gs.empty() && !(same_expr(st->offsets[e], ld.offsets[e]) && ts == tl)) {
              auto a = block_span(st->offsets[e], ts, len, ranges), b = block_span(ld.offsets[e], tl, len, ranges);
              if (!a || !b || !same_expr(a->origin, b->origin) || a->extent != b->extent) ok = false;
            }
          }
        }
      });
      if (!ok) return false;
    }
  }
  return true;
}

struct Group {
  std::vector<const NestSplit*> members;
  size_t grid_len = 0;
};

/// The memref whose memory a memref aliases (itself unless it is a view).
int root_of(const std::vector<MemRef>& memrefs, int m) {
  while (memrefs[m].view) m = memrefs[m].view->base;
  return m;
}

/// Two different memrefs over the same memory, one written in the group and
/// the other touched by `s`, would need blocks of other tasks: keep them apart.
bool aliases_conflict(const Group& g, const NestSplit& s, const std::vector<MemRef>& memrefs) {
  std::set<int> touched = s.reads;
  touched.insert(s.produces);
  for (const NestSplit* m : g.members) {
    for (int t : touched) {
      if (t != m->produces && root_of(memrefs, t) == root_of(memrefs, m->produces)) return true;
      for (int r : m->reads)
        if (t == s.produces && r != t && root_of(memrefs, r) == root_of(memrefs, t)) return true;
    }
  }
  return false;
}

}  // namespace

BlockGraph FuseBlocks(const TileGraph& g, const PassOptions& opts) {
  std::vector<NestSplit> splits;
  for (const TileNest& n : g.nests) splits.push_back(split_nest(n));

  // Greedy grouping in program order.
  std::vector<Group> groups;
  for (const NestSplit& s : splits) {
    bool cut = opts.cut_before.count(static_cast<int>(&s - splits.data())) > 0;
    if (opts.fusion && !opts.disabled.count("fuse_blocks") && !cut && !groups.empty() && groups.back().members[0]->nest->region == s.nest->region &&
        s.fusible && groups.back().members.back()->fusible) {
      Group& last = groups.back();
      bool consumes = false, shares_input = false;
      for (const NestSplit* m : last.members) {
        consumes |= s.reads.count(m->produces) > 0;
        for (int r : m->reads) shares_input |= s.reads.count(r) > 0;
      }
      // Siblings reading the same tensor over the very same grid (two matmuls
      // of one activation) fuse too, so their common consumer can join them.
      bool sibling = !consumes && shares_input && s.grid.size() == last.grid_len &&
                     common_prefix(last.members[0]->grid, s.grid) == s.grid.size() && !s.grid.empty();
      if ((consumes || sibling) && !aliases_conflict(last, s, g.memrefs)) {
        size_t len = std::min(last.grid_len, common_prefix(last.members[0]->grid, s.grid));
        bool keeps_parallelism = (len > 0 || (last.grid_len == 0 && s.grid.empty())) &&
                                 !serialises(last.members, last.grid_len, s, len);
        std::vector<const NestSplit*> trial = last.members;
        trial.push_back(&s);
        if (keeps_parallelism && aligned(trial, len, g)) {
          last.members = std::move(trial);
          last.grid_len = len;
          continue;
        }
      }
    }
    groups.push_back(Group{{&s}, s.grid.size()});
  }

  BlockGraph out;
  out.name = g.name;
  out.memrefs = g.memrefs;
  out.params = g.params;
  out.outputs = g.outputs;
  out.dyn_dims = g.dyn_dims;
  out.regions = g.regions;
  out.reads = g.reads;

  // Tensors other tensors view must stay in global memory.
  std::set<int> viewed;
  for (const MemRef& m : g.memrefs)
    if (m.view) viewed.insert(m.view->base);

  // Which group produces / reads each memref.
  std::map<int, size_t> producer;
  std::map<int, std::set<size_t>> readers;
  for (size_t gi = 0; gi < groups.size(); ++gi)
    for (const NestSplit* m : groups[gi].members) {
      producer[m->produces] = gi;
      for (int r : m->reads) readers[r].insert(gi);
    }

  for (size_t gi = 0; gi < groups.size(); ++gi) {
    const Group& grp = groups[gi];
    size_t len = grp.grid_len;
    InCoreFunction f;
    f.name = grp.members.size() == 1 ? grp.members[0]->nest->name : fmt::format("{}_fused_{}", g.name, gi);
    for (const NestSplit* m : grp.members) {
      auto b = member_body(*m, len);
      f.body.insert(f.body.end(), b.begin(), b.end());
      f.fused_ops.push_back(m->nest->name);
      f.source_ops.push_back(m->nest->source_op);
    }
    // Scalars: the block indices, then every other variable the body reads
    // (symbolic dims, indices of enclosing pypto.loop regions).
    for (size_t k = 0; k < len; ++k) f.scalar_params.push_back(grid_var(k));
    for (const auto& v : free_vars(f.body))
      if (std::find(f.scalar_params.begin(), f.scalar_params.end(), v) == f.scalar_params.end())
        f.scalar_params.push_back(v);
    for (int t : tiles_of(f.body)) f.tiles.push_back(g.tiles.at(t));

    // Memrefs in the order they are first touched.
    std::vector<int> touched;
    std::map<int, bool> stored;
    for_each_instr(f.body, [&](const Instr& in) {
      if (!reads_memory(in.op) && !writes_memory(in.op)) return;
      if (std::find(touched.begin(), touched.end(), in.memref) == touched.end()) touched.push_back(in.memref);
      if (writes_memory(in.op)) stored[in.memref] = true;
    });

    BlockLaunch launch;
    launch.function = static_cast<int>(out.functions.size());
    launch.region = grp.members[0]->nest->region;
    // The grid loops become g0, g1, ...; an inner grid loop's bounds may read an outer one's
    // variable (the last chunk of a chunked loop).
    std::map<std::string, Expr> renamed;
    for (size_t k = 0; k < len; ++k) {
      Loop l = grp.members[0]->grid[k];
      l.start = l.start.substitute(renamed);
      l.stop = l.stop.substitute(renamed);
      l.step = l.step.substitute(renamed);
      renamed[l.var] = Expr::var(grid_var(k));
      l.var = grid_var(k);
      l.body.clear();
      launch.grid.push_back(l);
    }
    launch.call.callee = launch.function;
    for (const auto& s : f.scalar_params) launch.call.scalars.push_back(Expr::var(s));

    for (int mem : touched) {
      MemRef& m = out.memrefs[mem];
      bool local = stored[mem] && m.kind == MemKind::Workspace && !viewed.count(mem) && readers[mem].size() <= 1 &&
                   (readers[mem].empty() || *readers[mem].begin() == gi);
      // Per dim: the block all accesses agree on, if any (same offset and
      // tile extent, or else the same block of the grid).
      size_t rank = m.shape.size();
      std::vector<std::optional<Expr>> origin(rank);
      std::vector<bool> blocked(rank, true);
      std::vector<int64_t> tile_extent(rank, 0);
      std::vector<std::vector<std::pair<Expr, int64_t>>> accesses(rank);
      for_each_instr(f.body, [&](const Instr& in) {
        if ((!reads_memory(in.op) && !writes_memory(in.op)) || in.memref != mem) return;
        const TileDecl& t = g.tiles[memory_tile(in)];
        for (size_t e = 0; e < rank; ++e) {
          if (grid_vars_in(in.offsets[e], len).empty()) blocked[e] = false;
          else accesses[e].emplace_back(in.offsets[e], t.shape[e]);
        }
      });
      Ranges ranges = loop_var_ranges(f.body);
      std::set<std::string> outer_vars = free_vars(f.body);
      for (size_t e = 0; e < rank; ++e) {
        if (!blocked[e] || accesses[e].empty()) continue;
        origin[e] = accesses[e][0].first;
        tile_extent[e] = accesses[e][0].second;
        bool same = true;
        for (const auto& [off, ext] : accesses[e]) same &= same_expr(off, *origin[e]) && ext == tile_extent[e];
        for (const auto& v : vars_of(*origin[e])) same &= outer_vars.count(v) > 0;  // no inner loop variable
        if (same) continue;
        origin[e].reset();
        for (const auto& [off, ext] : accesses[e]) {
          auto span = block_span(off, ext, len, ranges);
          if (!span || (origin[e] && (!same_expr(span->origin, *origin[e]) || span->extent != tile_extent[e]))) {
            blocked[e] = false;
            break;
          }
          origin[e] = span->origin;
          tile_extent[e] = span->extent;
        }
      }
      std::map<int, Expr> rebase;  // dim -> origin subtracted inside the function
      CallArg arg;
      arg.memref = mem;
      std::vector<Expr> block_shape;
      for (size_t e = 0; e < rank; ++e) {
        if (blocked[e] && origin[e]) {
          rebase[e] = *origin[e];
          arg.offsets.push_back(*origin[e]);
          auto c = m.shape[e].as_const();
          arg.extents.push_back(c && *c % tile_extent[e] == 0 ? Expr(tile_extent[e])
                                                              : min(Expr(tile_extent[e]), m.shape[e] - *origin[e]));
          block_shape.push_back(Expr(tile_extent[e]));
        } else {
          arg.offsets.push_back(Expr(0));
          arg.extents.push_back(m.shape[e]);
          block_shape.push_back(m.shape[e]);
        }
      }
      for_each_instr(f.body, [&](Instr& in) {
        if ((!reads_memory(in.op) && !writes_memory(in.op)) || in.memref != mem) return;
        for (auto& [e, o] : rebase) in.offsets[e] = in.offsets[e] - o;
      });
      if (local) {
        m.kind = MemKind::Local;
        m.shape = block_shape;
        f.locals.push_back(mem);
        // A local sized by a symbolic dim needs that dim inside the function.
        for (const Expr& d : block_shape)
          for (const auto& v : vars_of(d))
            if (std::find(f.scalar_params.begin(), f.scalar_params.end(), v) == f.scalar_params.end()) {
              f.scalar_params.push_back(v);
              launch.call.scalars.push_back(Expr::var(v));
            }
      } else {
        RegionParam p;
        p.name = m.name;
        p.memref = mem;
        p.dtype = m.dtype;
        p.max_extents = block_shape;
        p.is_output = stored[mem];
        p.accumulate = accumulates_only(f.body, mem);
        f.params.push_back(p);
        launch.call.args.push_back(arg);
      }
    }
    out.functions.push_back(std::move(f));
    out.launches.push_back(std::move(launch));
  }
  return out;
}

}  // namespace pypto
