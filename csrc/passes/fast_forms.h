#pragma once
#include "ir/program.h"
#include "passes/pass.h"

namespace pypto {
/// "fast_forms": fused chain values computed by their opcode's fast form. See fast_forms.cc.
BlockGraph FastForms(const BlockGraph& g, const PassOptions& opts);
}  // namespace pypto
