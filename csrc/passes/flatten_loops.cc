// Pass "flatten_loops": loops of one iteration become straight-line code.
//
// Requires: a verified Block Graph.
// Guarantees: a loop inside an InCore function whose constant bounds give
// exactly one iteration (start < stop <= start + step) is replaced by its
// body, with the loop variable replaced by the start. Nothing else changes.
// A tile as wide as the tensor (a whole row per tile) makes every inner loop
// of a fused row kernel run once; flattened, the kernel is one straight
// sequence, so forward_tiles can hand a stored row straight to the loop that
// reads it back instead of going through a local buffer.
#include "passes/flatten_loops.h"

#include "passes/util.h"

namespace pypto {

namespace {

bool single_trip(const Loop& l) {
  if (!l.start.is_const() || !l.stop.is_const() || !l.step.is_const()) return false;
  const int64_t start = l.start.value(), stop = l.stop.value(), step = l.step.value();
  return step > 0 && start < stop && stop <= start + step;
}

void flatten(std::vector<Stmt>& body) {
  std::vector<Stmt> out;
  out.reserve(body.size());
  for (Stmt& s : body) {
    auto* l = std::get_if<Loop>(&s.node);
    if (l == nullptr) {
      out.push_back(std::move(s));
      continue;
    }
    flatten(l->body);
    if (!single_trip(*l)) {
      out.push_back(std::move(s));
      continue;
    }
    std::vector<Stmt> inner = std::move(l->body);
    substitute(inner, {{l->var, l->start}});
    for (Stmt& t : inner) out.push_back(std::move(t));
  }
  body = std::move(out);
}

}  // namespace

BlockGraph FlattenLoops(const BlockGraph& g, const PassOptions&) {
  BlockGraph out = g;
  for (InCoreFunction& f : out.functions) flatten(f.body);
  return out;
}

}  // namespace pypto
