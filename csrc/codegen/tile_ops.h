// PTO tile instructions for the CPU backend.
//
// Generated InCore kernels call these templates; codegen pastes this header
// (after pypto_abi.h) into every generated source file, with each part below
// inlined in place of its #include (cmake/embed_headers.cmake). Tiles are row-major
// arrays of compile-time size, 64-byte aligned, with no aliasing between
// operands except where an instruction says so (an accumulator may be both
// destination and first source), so loops over them vectorise.
#ifndef PYPTO_TILE_OPS_H_
#define PYPTO_TILE_OPS_H_

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <climits>
#include <limits>
#include <type_traits>
#include <utility>

// The parts, in dependency order.
#include "tile_ops/target.h"
#include "tile_ops/base.h"
#include "tile_ops/convert.h"
#include "tile_ops/orchestration.h"
#include "tile_ops/memory.h"
#include "tile_ops/vector_math.h"
#include "tile_ops/elementwise.h"
#include "tile_ops/matmul.h"
#include "tile_ops/matmul_bf16.h"
#include "tile_ops/gather_scatter.h"
#include "tile_ops/sort.h"
#include "tile_ops/random.h"

#endif  // PYPTO_TILE_OPS_H_
