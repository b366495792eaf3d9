/// Small helpers shared by the passes: statement walks and renaming.
#pragma once

#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ir/program.h"

namespace pypto {

/// Calls `fn` on every instruction in `body`, loops included, in program order.
void for_each_instr(const std::vector<Stmt>& body, const std::function<void(const Instr&)>& fn);
/// Mutable form of for_each_instr.
void for_each_instr(std::vector<Stmt>& body, const std::function<void(Instr&)>& fn);
/// Substitutes variables in every expression of `body` (offsets, valid extents, loop bounds, call args)
/// and renames loop variables that appear as keys mapped to variables.
void substitute(std::vector<Stmt>& body, const std::map<std::string, Expr>& env);
/// Variables an expression mentions.
std::set<std::string> vars_of(const Expr& e);
/// Variables `body` reads that no loop inside it binds.
std::set<std::string> free_vars(const std::vector<Stmt>& body);
/// Tile ids read or written in `body`.
std::set<int> tiles_of(const std::vector<Stmt>& body);

}  // namespace pypto
