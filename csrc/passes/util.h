/// Small helpers shared by the passes: statement walks and renaming.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ir/program.h"
#include "ir/tensor_graph.h"

namespace pypto {

// for_each_instr (every instruction of a body) is in ir/program.h, for the verifier too.
/// Calls `fn` on every CALL in `body` (an orchestration), loops and both branches of conditions
/// included, in program order.
void for_each_call(std::vector<Stmt>& body, const std::function<void(Call&)>& fn);
void for_each_call(const std::vector<Stmt>& body, const std::function<void(const Call&)>& fn);
/// Calls `fn` on every Fused run in `body`.
void for_each_fused(std::vector<Stmt>& body, const std::function<void(Fused&)>& fn);
/// Substitutes variables in every expression of `body` (offsets, valid extents, loop bounds, call args)
/// and renames loop variables that appear as keys mapped to variables.
void substitute(std::vector<Stmt>& body, const std::map<std::string, Expr>& env);
/// Variables an expression mentions.
std::set<std::string> vars_of(const Expr& e);
/// Variables `body` reads that no loop inside it binds.
std::set<std::string> free_vars(const std::vector<Stmt>& body);
/// Tile ids read or written in `body`.
std::set<int> tiles_of(const std::vector<Stmt>& body);

/// A Tile Graph nest split into its leading parallel grid loops and the rest.
struct NestSplit {
  const TileNest* nest = nullptr;
  std::vector<Loop> grid;  ///< parallel loops with empty bodies, outermost first
  std::vector<Stmt> body;  ///< what the innermost grid loop contains
  int produces = -1;       ///< memref stored by the nest
  std::set<int> reads;     ///< memrefs loaded by the nest (and updated by a scatter by destination)
  bool fusible = true;     ///< data-dependent addressing (gather/scatter) or TileNest::alone keeps a nest on its own
};
NestSplit split_nest(const TileNest& n);
/// Rebuilds a nest body from grid loops (their bodies ignored) around `body`.
std::vector<Stmt> wrap_in_grid(const std::vector<Loop>& grid, std::vector<Stmt> body);
/// Same dim, tile, start, stop and step (the variable may differ).
bool same_grid_loop(const Loop& a, const Loop& b);
/// Number of leading loops on which two grids agree.
size_t common_prefix(const std::vector<Loop>& a, const std::vector<Loop>& b);

/// The constant [min, max] each loop variable bound inside `body` takes, where
/// its bounds allow one (a stop of the form min(c, ...) counts as c).
std::map<std::string, std::pair<int64_t, int64_t>> loop_var_ranges(const std::vector<Stmt>& body);
/// The constant range of `e` when it is linear in the variables of `ranges`
/// and mentions no other variable; nullopt otherwise.
std::optional<std::pair<int64_t, int64_t>> linear_range(const Expr& e,
                                                        const std::map<std::string, std::pair<int64_t, int64_t>>& ranges);

/// The declaration of tile `id` of function `f` (an InternalError when it has none).
const TileDecl& tile_of(const InCoreFunction& f, int id);

/// A tile extent along a dim: `tile`, clamped to a smaller static dim.
int64_t clamp_tile(const Expr& dim, int64_t tile);
/// The output tile of matmul `op` in `g`: [1, ..., bb, m, n] with m and n its cube tile's (clamped
/// to static dims) and bb the batch block, the number of consecutive elements of the innermost
/// batch dim one task multiplies: 1 unless each product (m x K by K x n) is below kBatchBlockMacs
/// multiply-adds, so that a batch of tiny products is not one task each (their submission and
/// scheduling would cost more than the products), yet not below kBatchBlockMinTasks tasks when the
/// grid's size is known. expand_tiles walks this grid; retile_epilogues gives it to the epilogues.
/// 256K multiply-adds take a core 1-2 us, about what a task's submission and scheduling cost.
constexpr int64_t kBatchBlockMacs = 256 * 1024;
constexpr int64_t kBatchBlockMinTasks = 16;
std::vector<int64_t> matmul_output_tile(const TensorGraph& g, const TensorOp& op);

}  // namespace pypto
