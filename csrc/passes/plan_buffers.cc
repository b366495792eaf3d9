// Pass "plan_buffers": on-chip buffer sizes of InCore functions.
//
// Requires: a verified Block Graph whose local buffers have static shapes.
// Guarantees: every InCore function's `buffer_bytes` is the sum of its tile
// buffers and static local buffers, each rounded up to 64 bytes (the
// alignment the generated code gives them); locals sized by a symbolic dim
// are allocated at run time and not counted.
#include "passes/plan_buffers.h"

#include <fmt/format.h>

#include "ir/errors.h"

namespace pypto {

BlockGraph PlanBuffers(const BlockGraph& g, const PassOptions&) {
  BlockGraph out = g;
  for (InCoreFunction& f : out.functions) {
    int64_t bytes = 0;
    for (const TileDecl& t : f.tiles) bytes += tile_bytes(t);
    // A local sized by a symbolic dim is allocated when the kernel runs; its
    // bytes are not part of the static figure.
    for (int l : f.locals)
      if (!local_is_dynamic(out.memrefs.at(l))) bytes += local_bytes(out.memrefs.at(l));
    f.buffer_bytes = bytes;
  }
  return out;
}

}  // namespace pypto
