/// Invariants of each graph level. The pipeline runs the verifier after every
/// pass (PassOptions::verify); each rule raises VerifyError with a message
/// that starts with its rule name, e.g. "[tile.use-before-def]".
#pragma once

#include "ir/program.h"
#include "ir/tensor_graph.h"

namespace pypto {

void verify(const TensorGraph& g);
void verify(const TileGraph& g);
void verify(const BlockGraph& g);
void verify(const ExecutionGraph& g);

}  // namespace pypto
