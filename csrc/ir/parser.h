/// Parser of .pto assembly: reads the text print_pto writes back into an
/// Execution Graph, so that print_pto(parse_pto(text)) == text for every
/// program the compiler produces. It also accepts a few hand-written (seed)
/// forms: `: (!pto.memref) -> !pto.tile<...>` and `: T -> T` instruction
/// signatures, tiles declared by their first definition, stores without a
/// valid list, CALL arguments without a region, `%name` in expressions.
#pragma once

#include <string>

#include "ir/program.h"

namespace pypto {

/// Parses .pto text into an Execution Graph. Throws PtoSyntaxError(line,
/// column, message) (1-based positions) on malformed input; never throws
/// anything else.
///
/// The graph holds one memref per parameter of each InCore function (kind
/// Input, or Output when marked `out`, shaped by the parameter's type) that
/// the function's RegionParam binds, the functions' local buffers, and the
/// orchestration's parameters, outputs, workspaces and views. Expressions
/// are kept exactly as written (no simplification). The module line
/// (`module @name entry @entry`), a function's kind (`incore func`,
/// `orchestration func`), its `buffer_bytes=` and `fused=[...]` and a loop's
/// `parallel dim= tile=` are syntax; the older comment forms (`// PTO Module:`,
/// `// Entry:`, `// Function Type:`, `// Buffer bytes:`, `// Fused:`,
/// `// parallel`) are still read. Without a kind a function is the
/// orchestration when its name is the entry's, and an InCore function
/// otherwise; InCore functions must be defined before the orchestration calls
/// them.
ExecutionGraph parse_pto(const std::string& text);

}  // namespace pypto
