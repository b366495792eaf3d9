#include "passes/binary_expand.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/errors.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "passes/util.h"
#include "../sanitized.h"

namespace pypto {
namespace {

const std::map<int64_t, int64_t> kSeedLevels = {{4096, 64}, {2048, 64}, {1024, 64}, {512, 64}, {256, 64}, {0, 32}};

MemRef Mem(int id, const std::string& name, MemKind kind) {
  MemRef m;
  m.id = id;
  m.name = name;
  m.kind = kind;
  m.shape = {Expr::var("num_tiles") * Expr(32), Expr(128)};
  return m;
}

// An InCore function over `rows`-row blocks of the given memrefs (empty body).
InCoreFunction Fn(const std::string& name, int64_t rows, const std::vector<int>& memrefs, int outputs = 0,
                  std::vector<std::string> scalars = {}) {
  InCoreFunction f;
  f.name = name;
  for (size_t i = 0; i < memrefs.size(); ++i) {
    RegionParam p;
    p.name = fmt::format("p{}", i);
    p.memref = memrefs[i];
    p.max_extents = {Expr(rows), Expr(128)};
    p.is_output = static_cast<int>(i) < outputs;
    f.params.push_back(p);
  }
  f.scalar_params = std::move(scalars);
  return f;
}

CallArg Arg(int memref, const Expr& tile) { return CallArg{memref, {tile * Expr(32), Expr(0)}, {Expr(32), Expr(128)}}; }

Loop MakeLoop(const std::string& var, const Expr& start, const Expr& stop, std::optional<LoopRange> range,
              std::vector<Stmt> body) {
  Loop l;
  l.var = var;
  l.start = start;
  l.stop = stop;
  l.step = Expr(1);
  l.range = std::move(range);
  l.body = std::move(body);
  return l;
}

// FOR i in [start, stop) (ranged) { CALL f(x[i * 32, 0; 32, 128], %tile -> i) } with
// variants f_64 and f_128 (unless `variants` is off).
ExecutionGraph OneLoop(std::optional<LoopRange> range, const Expr& start = Expr(0),
                       const Expr& stop = Expr::var("num_tiles"), bool variants = true) {
  ExecutionGraph g;
  g.name = "one_loop";
  g.memrefs = {Mem(0, "x", MemKind::Input)};
  g.params = {0};
  g.dyn_dims = {"num_tiles"};
  for (const std::string& v : vars_of(start))
    if (v != "num_tiles") g.dyn_dims.push_back(v);
  g.functions.push_back(Fn("f", 32, {0}, 0, {"tile"}));
  if (variants) {
    g.functions.push_back(Fn("f_64", 64, {0}, 0, {"tile"}));
    g.functions.push_back(Fn("f_128", 128, {0}, 0, {"tile"}));
  }
  Expr i = Expr::var("i");
  Call c{0, {Arg(0, i)}, {i}};
  g.orchestration = {Stmt{MakeLoop("i", start, stop, std::move(range), {Stmt{c}})}};
  return g;
}

struct CallRec {
  std::string callee;
  std::vector<int64_t> offsets, extents, scalars;
};

struct Trace {
  std::vector<CallRec> calls;
  std::map<std::string, int64_t> iters;  ///< iterations run per loop variable
};

// Runs the orchestration like CompiledProgram::count_tasks, recording every call.
Trace Execute(const ExecutionGraph& g, std::map<std::string, int64_t> env) {
  Trace t;
  auto lookup = [&](const std::string& n) -> int64_t {
    auto it = env.find(n);
    if (it == env.end()) throw InternalError("unbound variable " + n);
    return it->second;
  };
  auto eval = [&](const std::vector<Expr>& v) {
    std::vector<int64_t> out;
    for (const Expr& e : v) out.push_back(e.eval(lookup));
    return out;
  };
  std::function<void(const std::vector<Stmt>&)> walk = [&](const std::vector<Stmt>& body) {
    for (const Stmt& s : body) {
      if (auto* c = std::get_if<Call>(&s.node)) {
        CallRec r;
        r.callee = g.functions.at(c->callee).name;
        for (const CallArg& a : c->args) {
          for (int64_t o : eval(a.offsets)) r.offsets.push_back(o);
          for (int64_t x : eval(a.extents)) r.extents.push_back(x);
        }
        r.scalars = eval(c->scalars);
        t.calls.push_back(std::move(r));
      } else if (auto* i = std::get_if<IfThen>(&s.node)) {
        walk(i->cond.eval(lookup) ? i->then_body : i->else_body);
      } else if (auto* l = std::get_if<Loop>(&s.node)) {
        EXPECT_FALSE(l->range.has_value()) << "FOR %" << l->var << " still has a range";
        int64_t start = l->start.eval(lookup), stop = l->stop.eval(lookup), step = l->step.eval(lookup);
        t.iters[l->var] += 0;
        for (int64_t v = start; v < stop; v += step) {
          env[l->var] = v;
          ++t.iters[l->var];
          walk(l->body);
        }
        env.erase(l->var);
      }
    }
  };
  walk(g.orchestration);
  return t;
}

// Number of calls the orchestration runs (CompiledProgram::count_tasks without a compiled program).
int64_t CountCalls(const ExecutionGraph& g, std::map<std::string, int64_t> env) {
  auto lookup = [&](const std::string& n) { return env.at(n); };
  std::function<int64_t(const std::vector<Stmt>&)> walk = [&](const std::vector<Stmt>& body) -> int64_t {
    int64_t n = 0;
    for (const Stmt& s : body) {
      if (std::holds_alternative<Call>(s.node)) {
        ++n;
      } else if (auto* i = std::get_if<IfThen>(&s.node)) {
        n += walk(i->cond.eval(lookup) ? i->then_body : i->else_body);
      } else if (auto* l = std::get_if<Loop>(&s.node)) {
        int64_t start = l->start.eval(lookup), stop = l->stop.eval(lookup);
        for (int64_t v = start; v < stop; ++v) {
          env[l->var] = v;
          n += walk(l->body);
        }
        env.erase(l->var);
      }
    }
    return n;
  };
  return walk(g.orchestration);
}

// Rows [offset, offset + extent) of argument `arg` (rank 2) of every call must
// tile [0, rows) exactly once, in increasing order.
void ExpectRowsCovered(const Trace& t, int64_t rows, size_t arg = 0) {
  int64_t next = 0;
  for (const CallRec& c : t.calls) {
    ASSERT_EQ(c.offsets.at(2 * arg), next) << "call to @" << c.callee;
    int64_t ext = c.extents.at(2 * arg);
    EXPECT_EQ(c.callee, ext == 32 ? "f" : fmt::format("f_{}", ext));
    next += ext;
  }
  EXPECT_EQ(next, rows);
}

TEST(BinaryExpandTest, SeedExample300Is256BlockPlus44Residual) {
  ExecutionGraph e = BinaryExpand(OneLoop(LoopRange{4096, 256, {}}), PassOptions{});
  EXPECT_NO_THROW(verify(e));
  // FOR i_blk { FOR i_4096 }, IF for 2048, 1024, 512, 256, IF residual.
  ASSERT_EQ(e.orchestration.size(), 6u);
  const Loop& blk = std::get<Loop>(e.orchestration[0].node);
  EXPECT_EQ(blk.var, "i_blk");
  EXPECT_FALSE(blk.range.has_value());
  const Loop& big = std::get<Loop>(blk.body.at(0).node);
  EXPECT_EQ(big.var, "i_4096");
  EXPECT_EQ(big.stop.as_const(), 4096);
  const IfThen& b256 = std::get<IfThen>(e.orchestration[4].node);
  EXPECT_EQ(std::get<Loop>(b256.then_body.at(0).node).var, "i_256");
  EXPECT_EQ(std::get<Loop>(b256.then_body.at(0).node).stop.as_const(), 256);
  const IfThen& rest = std::get<IfThen>(e.orchestration[5].node);
  EXPECT_EQ(std::get<Loop>(rest.then_body.at(0).node).var, "i_r");
  EXPECT_EQ(print(e).find("max_range"), std::string::npos);

  Trace t = Execute(e, {{"num_tiles", 300}});
  EXPECT_EQ(t.iters["i_blk"], 0);
  EXPECT_EQ(t.iters["i_4096"], 0);
  EXPECT_EQ(t.iters["i_2048"], 0);
  EXPECT_EQ(t.iters["i_1024"], 0);
  EXPECT_EQ(t.iters["i_512"], 0);
  EXPECT_EQ(t.iters["i_256"], 256);
  EXPECT_EQ(t.iters["i_r"], 44);
  ASSERT_EQ(t.calls.size(), 300u);
  for (int64_t k = 0; k < 300; ++k) {
    const CallRec& c = t.calls[k];
    EXPECT_EQ(c.callee, "f");
    EXPECT_EQ(c.offsets, (std::vector<int64_t>{k * 32, 0}));
    EXPECT_EQ(c.extents, (std::vector<int64_t>{32, 128}));
    EXPECT_EQ(c.scalars, (std::vector<int64_t>{k}));
  }
}

std::vector<int64_t> Counts() {
  std::vector<int64_t> ns;
  // Every count to 64, then every test::kSanitizerThinning-th (every one in the ordinary build).
  for (int64_t n = 0; n <= 300; n += n < 64 ? 1 : test::kSanitizerThinning) ns.push_back(n);
  for (int64_t n = 301; n <= 5000; n += 131 * test::kSanitizerThinning) ns.push_back(n);  // and every block boundary below
  for (int64_t n : {511, 512, 513, 1023, 1024, 2047, 2048, 4095, 4096, 4097, 4352, 4999, 5000}) ns.push_back(n);
  return ns;
}

TEST(BinaryExpandTest, VisitsEveryIterationOnceInOrder) {
  const std::vector<std::pair<int64_t, int64_t>> ranges = {{4096, 256}, {8, 1}, {16, 4}, {64, 64}, {1, 1}, {256, 32}};
  for (auto [M, m] : ranges) {
    ExecutionGraph e = BinaryExpand(OneLoop(LoopRange{M, m, {}}), PassOptions{});
    ASSERT_NO_THROW(verify(e));
    for (int64_t n : Counts()) {
      Trace t = Execute(e, {{"num_tiles", n}});
      ASSERT_EQ(static_cast<int64_t>(t.calls.size()), n) << "M=" << M << " m=" << m << " n=" << n;
      for (int64_t k = 0; k < n; ++k)
        ASSERT_EQ(t.calls[k].scalars, (std::vector<int64_t>{k})) << "M=" << M << " m=" << m << " n=" << n;
    }
  }
}

TEST(BinaryExpandTest, SymbolicStartAndEmptyRange) {
  // FOR i in [s, num_tiles): visits [s, num_tiles), nothing when num_tiles <= s.
  ExecutionGraph e = BinaryExpand(OneLoop(LoopRange{64, 8, {}}, Expr::var("s")), PassOptions{});
  ASSERT_NO_THROW(verify(e));
  for (int64_t s : {0, 3, 100}) {
    for (int64_t stop : {0, 1, 7, 8, 9, 63, 64, 65, 129, 250}) {
      Trace t = Execute(e, {{"num_tiles", stop}, {"s", s}});
      std::vector<int64_t> seen, want;
      for (const CallRec& c : t.calls) seen.push_back(c.scalars.at(0));
      for (int64_t i = s; i < stop; ++i) want.push_back(i);
      EXPECT_EQ(seen, want) << "s=" << s << " stop=" << stop;
    }
  }
}

TEST(BinaryExpandTest, TileLevelsPickTheVariantAndHalveTheIterations) {
  ExecutionGraph e = BinaryExpand(OneLoop(LoopRange{4096, 256, kSeedLevels}), PassOptions{});
  ASSERT_NO_THROW(verify(e));
  const IfThen& b256 = std::get<IfThen>(e.orchestration[4].node);
  const Loop& l256 = std::get<Loop>(b256.then_body.at(0).node);
  EXPECT_EQ(l256.var, "i_256");
  EXPECT_EQ(l256.stop.as_const(), 128);
  const Loop& l4096 = std::get<Loop>(std::get<Loop>(e.orchestration[0].node).body.at(0).node);
  EXPECT_EQ(l4096.stop.as_const(), 2048);

  Trace t = Execute(e, {{"num_tiles", 256}});
  ASSERT_EQ(t.calls.size(), 128u);
  EXPECT_EQ(t.iters["i_256"], 128);
  for (int64_t k = 0; k < 128; ++k) {
    const CallRec& c = t.calls[k];
    EXPECT_EQ(c.callee, "f_64");
    EXPECT_EQ(c.offsets, (std::vector<int64_t>{k * 64, 0}));
    EXPECT_EQ(c.extents, (std::vector<int64_t>{64, 128}));
    EXPECT_EQ(c.scalars, (std::vector<int64_t>{2 * k}));  // the first of the two base tiles
  }

  t = Execute(e, {{"num_tiles", 300}});
  ASSERT_EQ(t.calls.size(), 128u + 44u);
  int f64 = 0, f = 0;
  for (const CallRec& c : t.calls) (c.callee == "f_64" ? f64 : f) += 1;
  EXPECT_EQ(f64, 128);
  EXPECT_EQ(f, 44);
  ExpectRowsCovered(t, 300 * 32);
}

TEST(BinaryExpandTest, TileLevelsCoverEveryRowOnce) {
  struct Case {
    int64_t M, m;
    std::map<int64_t, int64_t> levels;
  };
  const std::vector<Case> cases = {
      {4096, 256, kSeedLevels},
      {8, 2, {{8, 128}, {4, 64}, {2, 64}, {0, 32}}},  // scale 4 on the 8-block, 2 on the others
      {16, 1, {{16, 128}, {8, 64}, {0, 32}}},         // blocks 4, 2, 1 without an entry use the base rows
  };
  for (const Case& c : cases) {
    ExecutionGraph e = BinaryExpand(OneLoop(LoopRange{c.M, c.m, c.levels}), PassOptions{});
    ASSERT_NO_THROW(verify(e));
    for (int64_t n : Counts()) {
      SCOPED_TRACE(fmt::format("M={} m={} n={}", c.M, c.m, n));
      ExpectRowsCovered(Execute(e, {{"num_tiles", n}}), n * 32);
    }
  }
}

// FOR qt (ranged) { FOR kt (ranged) { CALL score(q[qt], k[kt]); CALL acc(o[qt], k[kt]) } }
ExecutionGraph Attention(const std::map<int64_t, int64_t>& levels) {
  ExecutionGraph g;
  g.name = "attention";
  g.memrefs = {Mem(0, "q", MemKind::Input), Mem(1, "k", MemKind::Input), Mem(2, "o", MemKind::Output)};
  g.params = {0, 1};
  g.outputs = {2};
  g.dyn_dims = {"num_tiles"};
  g.functions = {Fn("score", 32, {0, 1}), Fn("score_64", 64, {0, 1}), Fn("acc", 32, {2, 1}, 1),
                 Fn("acc_64", 64, {2, 1}, 1)};
  Expr qt = Expr::var("qt"), kt = Expr::var("kt");
  Call score{0, {Arg(0, qt), Arg(1, kt)}, {}};
  Call acc{2, {Arg(2, qt), Arg(1, kt)}, {}};
  LoopRange r{4096, 256, levels};
  Loop inner = MakeLoop("kt", Expr(0), Expr::var("num_tiles"), r, {Stmt{score}, Stmt{acc}});
  g.orchestration = {Stmt{MakeLoop("qt", Expr(0), Expr::var("num_tiles"), r, {Stmt{inner}})}};
  return g;
}

TEST(BinaryExpandTest, NestedLoopsExpandRecursively) {
  ExecutionGraph with = BinaryExpand(Attention(kSeedLevels), PassOptions{});
  ExecutionGraph without = BinaryExpand(Attention({}), PassOptions{});
  ASSERT_NO_THROW(verify(with));
  ASSERT_NO_THROW(verify(without));
  EXPECT_EQ(print(with).find("max_range"), std::string::npos);
  // The 256- and 512-blocks alone and together (the 256-block alone under the sanitizers).
  const std::vector<int64_t> counts = test::kSanitizerThinning > 1 ? std::vector<int64_t>{256}
                                                                   : std::vector<int64_t>{256, 512, 768};
  for (int64_t n : counts) {
    SCOPED_TRACE(n);
    Trace t = Execute(with, {{"num_tiles", n}});
    EXPECT_EQ(static_cast<int64_t>(t.calls.size()), 2 * (n / 2) * (n / 2));
    // Every (q tile, k tile) pair is scored exactly once, by 64x64-row blocks.
    std::vector<int> hits(n * n, 0);
    for (const CallRec& c : t.calls) {
      EXPECT_EQ(c.extents, (std::vector<int64_t>{64, 128, 64, 128}));
      if (c.callee != "score_64") {
        EXPECT_EQ(c.callee, "acc_64");
        continue;
      }
      for (int64_t a = c.offsets[0] / 32; a < (c.offsets[0] + 64) / 32; ++a)
        for (int64_t b = c.offsets[2] / 32; b < (c.offsets[2] + 64) / 32; ++b) ++hits.at(a * n + b);
    }
    for (int h : hits) ASSERT_EQ(h, 1);
    // The seed's count: (N / scale)^2 tasks per call, N^2 without tile levels.
    EXPECT_EQ(CountCalls(with, {{"num_tiles", n}}), 2 * (n / 2) * (n / 2));
    EXPECT_EQ(CountCalls(without, {{"num_tiles", n}}), 2 * n * n);
  }
}

TEST(BinaryExpandTest, NestedLevelsThatDisagreeAreRefused) {
  ExecutionGraph g = Attention(kSeedLevels);
  Loop& outer = std::get<Loop>(g.orchestration[0].node);
  std::get<Loop>(outer.body[0].node).range->tile_levels = {{256, 128}, {0, 32}};
  g.functions.push_back(Fn("score_128", 128, {0, 1}));
  try {
    BinaryExpand(g, PassOptions{});
    FAIL() << "expected UserError";
  } catch (const UserError& err) {
    std::string msg = err.what();
    EXPECT_NE(msg.find("%kt"), std::string::npos) << msg;
    EXPECT_NE(msg.find("%qt"), std::string::npos) << msg;
    EXPECT_NE(msg.find("128"), std::string::npos) << msg;
  }
}

TEST(BinaryExpandTest, LoopsInsideIfAndPlainLoopsWithConstantBoundsFold) {
  // FOR j in [0, 2) { IF (0 < num_tiles) { FOR i in [0, 300) ranged { CALL f } } }
  ExecutionGraph g = OneLoop(LoopRange{4096, 256, {}}, Expr(0), Expr(300));
  Stmt ranged = g.orchestration[0];
  IfThen cond{cmp_lt(Expr(0), Expr::var("num_tiles")), {ranged}, {}};
  g.orchestration = {Stmt{MakeLoop("j", Expr(0), Expr(2), std::nullopt, {Stmt{cond}})}};
  ExecutionGraph e = BinaryExpand(g, PassOptions{});
  ASSERT_NO_THROW(verify(e));
  const Loop& j = std::get<Loop>(e.orchestration.at(0).node);
  const IfThen& c = std::get<IfThen>(j.body.at(0).node);
  // n = 300 is constant: no block loop, no IFs, the 256-block and the residual.
  ASSERT_EQ(c.then_body.size(), 2u);
  EXPECT_EQ(std::get<Loop>(c.then_body[0].node).var, "i_256");
  EXPECT_EQ(std::get<Loop>(c.then_body[0].node).stop.as_const(), 256);
  EXPECT_EQ(std::get<Loop>(c.then_body[1].node).var, "i_r");
  EXPECT_EQ(std::get<Loop>(c.then_body[1].node).stop.as_const(), 44);
  Trace t = Execute(e, {{"num_tiles", 1}});
  ASSERT_EQ(t.calls.size(), 600u);
  for (int64_t k = 0; k < 600; ++k) EXPECT_EQ(t.calls[k].scalars, (std::vector<int64_t>{k % 300}));
}

TEST(BinaryExpandTest, NewLoopVariablesAvoidNamesInUse) {
  ExecutionGraph g = OneLoop(LoopRange{64, 8, {}});
  g.dyn_dims.push_back("i_r");  // a symbolic dim that happens to be called i_r
  ExecutionGraph e = BinaryExpand(g, PassOptions{});
  EXPECT_NO_THROW(verify(e));
  EXPECT_NE(print(e).find("%i_r_1"), std::string::npos);
  Trace t = Execute(e, {{"num_tiles", 77}, {"i_r", 5}});
  ASSERT_EQ(t.calls.size(), 77u);
  for (int64_t k = 0; k < 77; ++k) EXPECT_EQ(t.calls[k].scalars, (std::vector<int64_t>{k}));
}

TEST(BinaryExpandTest, GraphWithoutRangedLoopsIsUnchanged) {
  ExecutionGraph g = OneLoop(std::nullopt);
  Stmt loop = g.orchestration[0];
  std::get<Loop>(loop.node).parallel = true;
  std::get<Loop>(loop.node).dim = 0;
  std::get<Loop>(loop.node).tile = 32;
  g.orchestration = {loop, Stmt{IfThen{cmp_lt(Expr(4), Expr::var("num_tiles")), {loop}, {loop}}}};
  ExecutionGraph e = BinaryExpand(g, PassOptions{});
  EXPECT_NO_THROW(verify(e));
  EXPECT_EQ(print(e), print(g));
  EXPECT_EQ(print_pto(e), print_pto(g));
}

void ExpectUserError(const ExecutionGraph& g, const std::vector<std::string>& parts) {
  try {
    BinaryExpand(g, PassOptions{});
    ADD_FAILURE() << "expected UserError containing " << parts.at(0);
  } catch (const UserError& err) {
    std::string msg = err.what();
    for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << msg << " lacks " << p;
  }
}

TEST(BinaryExpandTest, InvalidRangesAreUserErrors) {
  ExecutionGraph step2 = OneLoop(LoopRange{4096, 256, {}});
  std::get<Loop>(step2.orchestration[0].node).step = Expr(2);
  ExpectUserError(step2, {"%i", "step 1", "found 2"});
  ExpectUserError(OneLoop(LoopRange{3000, 256, {}}), {"%i", "max_range 3000"});
  ExpectUserError(OneLoop(LoopRange{4096, 100, {}}), {"%i", "min_range 100"});
  ExpectUserError(OneLoop(LoopRange{4096, 0, {}}), {"%i", "min_range 0"});
  ExpectUserError(OneLoop(LoopRange{256, 512, {}}), {"%i", "min_range 512", "max_range 256"});
  ExpectUserError(OneLoop(LoopRange{4096, 256, {{4096, 64}, {256, 64}}}), {"%i", "key 0"});
  ExpectUserError(OneLoop(LoopRange{4096, 256, {{300, 64}, {0, 32}}}), {"%i", "key 300"});
  ExpectUserError(OneLoop(LoopRange{256, 256, {{512, 64}, {0, 32}}}), {"%i", "key 512"});
  ExpectUserError(OneLoop(LoopRange{256, 256, {{256, 0}, {0, 32}}}), {"%i", "rows 0"});
  ExpectUserError(OneLoop(LoopRange{256, 256, {{256, 48}, {0, 32}}}), {"%i", "48 rows", "base 32"});
  ExpectUserError(OneLoop(LoopRange{2, 2, {{2, 96}, {0, 32}}}), {"%i", "scale 3", "divide 2"});
}

TEST(BinaryExpandTest, MissingOrMismatchedVariantIsAUserError) {
  ExpectUserError(OneLoop(LoopRange{4096, 256, kSeedLevels}, Expr(0), Expr::var("num_tiles"), false),
                  {"binary_expand: FOR %i with tile_levels: block 4096 uses 64 rows but function @f_64 is not defined"});
  ExecutionGraph g = OneLoop(LoopRange{4096, 256, kSeedLevels});
  g.functions[1].params.push_back(g.functions[1].params[0]);
  ExpectUserError(g, {"%i", "@f_64", "2 regions"});
  // A block without calls needs no variant; scale 1 everywhere needs none either.
  ExecutionGraph ok = OneLoop(LoopRange{4096, 256, {{0, 32}, {256, 32}}}, Expr(0), Expr::var("num_tiles"), false);
  EXPECT_NO_THROW(verify(BinaryExpand(ok, PassOptions{})));
}

}  // namespace
}  // namespace pypto
