/// The single source of text for every graph level and for .pto assembly.
#pragma once

#include <string>

#include "ir/program.h"
#include "ir/tensor_graph.h"

namespace pypto {

/// Level 1 as text.
std::string print(const TensorGraph& g);
/// Level 2 as text.
std::string print(const TileGraph& g);
/// Level 3 as text, with the buffer bytes of each InCore function.
std::string print(const BlockGraph& g);
/// Level 4 as text.
std::string print(const ExecutionGraph& g);
/// The .pto assembly of a program: its InCore functions and its orchestration.
std::string print_pto(const ExecutionGraph& g);
/// A constant operand as .pto writes it: "-inf", "nan", "0.5", "1e-06".
std::string scalar_text(double v);
/// The .pto type of a tile, e.g. "!pto.tile<32x32xf32>".
std::string tile_type(const TileDecl& t);
/// The .pto type of a memref, e.g. "!pto.memref<gm,64x1024,f32>".
std::string memref_type(const MemRef& m);

}  // namespace pypto
