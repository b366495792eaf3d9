#pragma once
#include "ir/program.h"
#include "passes/pass.h"

namespace pypto {
/// "stream_stores": marks the stores that stream past the caches. See stream_stores.cc.
BlockGraph StreamStores(const BlockGraph& g, const PassOptions& opts);
/// Bytes from which a returned tensor is written with streaming stores on `t`.
int64_t stream_store_bytes(const Target& t);
}  // namespace pypto
