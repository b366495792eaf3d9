// Pass "stream_stores": stores that bypass the caches.
//
// Requires: a verified Block Graph.
// Guarantees: a plain (not atomic_add) TSTORE gets `stream` exactly when it writes a returned tensor of a static size of
// at least stream_store_bytes(target), far beyond what a core's caches keep, that no instruction of the
// program reads or scatters into (index_add's copy is updated right after it is stored). Every other
// TSTORE loses the flag.
#include "passes/stream_stores.h"

#include <fmt/format.h>

#include <algorithm>

#include "passes/util.h"

namespace pypto {

int64_t stream_store_bytes(const Target& t) {
  // Sixteen times a core's L2 (16 MiB with 1 MiB L2s): far past what one core's caches keep. The
  // L3 the system reports is the whole socket's (hundreds of MiB on a server), not this core's share.
  return std::max<int64_t>(16 * t.l2_bytes, int64_t{4} << 20);
}

BlockGraph StreamStores(const BlockGraph& g, const PassOptions& opts) {
  BlockGraph out = g;
  const int64_t threshold = stream_store_bytes(opts.target);
  auto bytes_of = [&](const MemRef& m) -> int64_t {
    if (m.kind != MemKind::Output) return -1;
    int64_t bytes = dtype_size(m.dtype);
    for (const Expr& d : m.shape) {
      if (!d.is_const()) return -1;
      bytes *= d.value();
    }
    return bytes;
  };
  auto root_of = [&](int m) {
    while (out.memrefs.at(m).view) m = out.memrefs.at(m).view->base;
    return m;
  };
  std::set<int> read_back;  // roots loaded, gathered from or scattered into anywhere
  for (const InCoreFunction& f : out.functions)
    for_each_instr(f.body, [&](const Instr& in) {
      if (in.op == Opcode::TLOAD || in.op == Opcode::TGATHER || in.op == Opcode::TSCATTER) read_back.insert(root_of(in.memref));
    });
  for (InCoreFunction& f : out.functions) {
    std::set<int> streamed;
    for_each_instr(f.body, [&](Instr& in) {
      if (in.op != Opcode::TSTORE || in.atomic) return;  // an atomic addition reads what it updates
      in.stream = bytes_of(out.memrefs.at(in.memref)) >= threshold && !read_back.count(root_of(in.memref));
      if (in.stream) streamed.insert(in.memref);
    });
    for (int m : streamed)
      pass_note(fmt::format("@{}: stores into %{} stream ({} bytes >= {})", f.name, out.memrefs.at(m).name,
                            bytes_of(out.memrefs.at(m)), threshold));
  }
  return out;
}

}  // namespace pypto
