/// Bounds of the memory an InCore function touches, so that no task reads or
/// writes outside the regions its CALL passed (or outside its local buffers).
///
/// Every TLOAD/TSTORE/TGATHER/TSCATTER touches a box: per dim, from its offset
/// to the offset plus its valid extent (clamped to the tile, as the tile ops
/// clamp it). Interval arithmetic over the function's loops turns each box
/// into bounds over the function's scalar parameters only; a CALL substitutes
/// its scalar arguments and compares them with its region extents, at compile
/// time where both are known and once per task otherwise. Accesses under an
/// IF, or whose offsets interval arithmetic cannot bound (a product of two
/// loop-dependent terms), are checked where they run instead.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ir/program.h"

namespace pypto {

/// One dim of the box some access of an InCore function touches.
struct AccessBound {
  int memref = -1;   ///< a region parameter's memref or a local buffer
  int dim = 0;
  Expr lo;           ///< lowest element index touched (over the function's scalar parameters)
  Expr hi;           ///< one past the highest
  std::string what;  ///< the access for messages, e.g. "tstore %u -> %dst"
};

struct FunctionBounds {
  std::vector<AccessBound> bounds;           ///< distinct bounds, first access of each named
  std::set<const Instr*> checked_where_run;  ///< accesses checked by the kernel itself
};

/// The bounds of every memory access of `f` (memrefs index into `memrefs`).
FunctionBounds access_bounds(const InCoreFunction& f, const std::vector<MemRef>& memrefs);

/// "tload %t <- %m" / "tstore %t -> %m" for messages.
std::string access_text(const Instr& in, const std::vector<TileDecl>& tiles, const std::vector<MemRef>& memrefs);

/// What a CALL must check so that the callee stays inside what it was given: `lo >= 0` and
/// `hi <= limit` per bound, after substituting the CALL's scalars. Bounds that hold for every
/// value are dropped; one that fails for every value throws UserError naming the function, the
/// access, the offset and the extent. A region of a view is cut to the part inside the view's
/// base at run time, so its upper bounds are always checked then.
struct CallCheck {
  std::optional<Expr> lo, hi;  ///< absent where that end holds for every value
  Expr limit;                  ///< the CALL's extent (or the local buffer's dim)
  int arg = -1;                ///< the CALL argument whose extent `limit` is (-1: a local buffer)
  int dim = 0;
  std::string what;  ///< "CALL @f argument %p -> %x: tload %t <- %p"
};
std::vector<CallCheck> call_checks(const Call& c, const InCoreFunction& f, const FunctionBounds& fb,
                                   const std::vector<MemRef>& memrefs);

}  // namespace pypto
