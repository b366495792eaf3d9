// The runtime's region index: canonical boxes of views, buckets, fallbacks and pruning.
#include "runtime/region_index.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <utility>
#include <vector>

#include "runtime/runtime.h"
#include "test_regions.h"
#include "../sanitized.h"

namespace pypto::runtime {
namespace {

using testing::StridedBox;

// How a test task accesses a region.
enum Mode { kRead, kWrite, kAccum };

class Tasks {
 public:
  // Adds a task with the given (region, write) accesses; returns its predecessors.
  std::vector<int64_t> Add(const std::vector<std::pair<pypto_region, bool>>& regions) {
    std::vector<std::pair<pypto_region, Mode>> modes;
    for (const auto& [r, write] : regions) modes.emplace_back(r, write ? kWrite : kRead);
    return AddModes(modes);
  }
  // Adds a task with the given (region, mode) accesses; returns its predecessors.
  std::vector<int64_t> AddModes(const std::vector<std::pair<pypto_region, Mode>>& regions) {
    std::vector<RegionAccess> acc;
    for (const auto& [r, mode] : regions) {
      RegionAccess a{};
      a.desc = index_.intern(r);
      a.offset = r.offset;
      a.extent = r.extent;
      a.write = mode == kWrite;
      a.accum = mode == kAccum;
      acc.push_back(a);
    }
    std::vector<int64_t> preds;
    index_.add_task(acc.data(), acc.size(), next_++, preds);
    index_.prune();
    // Each predecessor once, in no particular order: compare them sorted.
    std::vector<int64_t> sorted = preds;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end()) << "a predecessor repeats";
    return sorted;
  }
  RegionIndex& index() { return index_; }
  // Starts a new graph on the same index, as a runtime does between runs.
  void Reset() {
    index_.reset();
    next_ = 0;
  }

 private:
  RegionIndex index_;
  int64_t next_ = 0;
};

using Preds = std::vector<int64_t>;

TEST(RegionIndexTest, ReadWriteRules) {
  float m[64 * 64];
  Tasks t;
  EXPECT_EQ(t.Add({{StridedBox(m, 0, 64, 1, 0, 0, 32, 64), true}}), Preds{});         // 0 writes rows 0-31
  EXPECT_EQ(t.Add({{StridedBox(m, 0, 64, 1, 32, 0, 32, 64), true}}), Preds{});        // 1 writes rows 32-63
  EXPECT_EQ(t.Add({{StridedBox(m, 0, 64, 1, 0, 0, 32, 64), false}}), Preds{0});       // 2 reads 0-31 (RAW)
  EXPECT_EQ(t.Add({{StridedBox(m, 0, 64, 1, 16, 0, 32, 64), false}}), (Preds{0, 1}));  // 3 straddles both
  EXPECT_EQ(t.Add({{StridedBox(m, 0, 64, 1, 0, 0, 32, 64), false}}), Preds{0});       // RAR adds nothing
  // A write after reads waits for the writer and every reader since (WAW + WAR).
  EXPECT_EQ(t.Add({{StridedBox(m, 0, 64, 1, 0, 0, 64, 64), true}}), (Preds{0, 1, 2, 3, 4}));
  // The covering write superseded every box: a later access depends on it alone.
  EXPECT_EQ(t.Add({{StridedBox(m, 0, 64, 1, 40, 8, 8, 8), false}}), Preds{5});
}

// Accumulations (atomic additions) wait for the box's writer and readers, reads and writes wait for
// them, and accumulations of one box do not wait for each other.
TEST(RegionIndexTest, AccumulateRules) {
  float m[64 * 64];
  Tasks t;
  const pypto_region top = StridedBox(m, 0, 64, 1, 0, 0, 32, 64), all = StridedBox(m, 0, 64, 1, 0, 0, 64, 64);
  EXPECT_EQ(t.AddModes({{all, kWrite}}), Preds{});                                  // 0 initialises
  EXPECT_EQ(t.AddModes({{top, kRead}}), Preds{0});                                  // 1 reads
  EXPECT_EQ(t.AddModes({{top, kAccum}}), (Preds{0, 1}));                            // 2 waits for 0's write, 1's read
  EXPECT_EQ(t.AddModes({{top, kAccum}}), (Preds{0, 1}));                            // 3 runs beside 2
  EXPECT_EQ(t.AddModes({{StridedBox(m, 0, 64, 1, 16, 0, 32, 64), kAccum}}), (Preds{0, 1}));  // 4 overlaps both
  EXPECT_EQ(t.AddModes({{top, kRead}}), (Preds{0, 2, 3, 4}));                       // 5 reads the sums
  EXPECT_EQ(t.AddModes({{top, kAccum}}), (Preds{0, 1, 5}));                         // 6 waits for the readers
  EXPECT_EQ(t.AddModes({{all, kWrite}}), (Preds{0, 1, 2, 3, 4, 5, 6}));            // 7 waits for everyone
  EXPECT_EQ(t.AddModes({{top, kAccum}}), Preds{7});
  EXPECT_EQ(t.AddModes({{top, kAccum}}), Preds{7});
  // Through task descriptors: the accumulate mode is accepted and two accumulating tasks are independent.
  Tasks d;
  const pypto_region r = StridedBox(m, 0, 64, 1, 0, 0, 64, 64);
  const int32_t h = d.index().handle(r);
  const int64_t off[2] = {0, 0}, ext[2] = {8, 64};
  std::vector<int64_t> preds;
  int64_t seq = 0;
  for (int32_t mode : {PYPTO_ACCESS_ACCUM, PYPTO_ACCESS_ACCUM, PYPTO_ACCESS_IN}) {
    const pypto_task_arg arg{h, mode, off, ext};
    EXPECT_EQ(d.index().add_task(&arg, 1, seq, preds), -1);
    std::sort(preds.begin(), preds.end());
    EXPECT_EQ(preds, mode == PYPTO_ACCESS_IN ? (Preds{0, 1}) : Preds{});
    ++seq;
  }
  const pypto_task_arg bad{h, 4, off, ext};
  EXPECT_EQ(d.index().add_task(&bad, 1, 3, preds), 0);
}

TEST(RegionIndexTest, TaskNeverDependsOnItself) {
  float m[16 * 16];
  Tasks t;
  EXPECT_EQ(t.Add({{StridedBox(m, 0, 16, 1, 0, 0, 16, 16), false}, {StridedBox(m, 0, 16, 1, 0, 0, 16, 16), true}}), Preds{});
  EXPECT_EQ(t.Add({{StridedBox(m, 0, 16, 1, 0, 0, 16, 16), false}}), Preds{0});
}

TEST(RegionIndexTest, PredecessorsNamedByManyAccessesAppearOnce) {
  float m[64 * 64];
  Tasks t;
  // Tasks 0-19 each read both halves of the matrix; 20 writes all of it, so it meets every reader
  // twice (more than the short lists deduplicated as they grow), and 21 then rewrites half of it.
  std::vector<int64_t> readers;
  for (int64_t i = 0; i < 20; ++i) {
    EXPECT_EQ(t.Add({{StridedBox(m, 0, 64, 1, 0, 0, 32, 64), false}, {StridedBox(m, 0, 64, 1, 32, 0, 32, 64), false}}),
              Preds{});
    readers.push_back(i);
  }
  EXPECT_EQ(t.Add({{StridedBox(m, 0, 64, 1, 0, 0, 64, 64), true}}), readers);
  EXPECT_EQ(t.Add({{StridedBox(m, 0, 64, 1, 0, 0, 32, 64), false}, {StridedBox(m, 0, 64, 1, 0, 0, 32, 64), true}}),
            Preds{20});
}

TEST(RegionIndexTest, ColumnBlocksOfOneRowBandAreIndependent) {
  float m[64 * 64];
  Tasks t;
  EXPECT_EQ(t.Add({{StridedBox(m, 0, 64, 1, 0, 0, 32, 32), true}}), Preds{});
  EXPECT_EQ(t.Add({{StridedBox(m, 0, 64, 1, 0, 32, 32, 32), true}}), Preds{});  // byte ranges overlap, boxes do not
  EXPECT_EQ(t.Add({{StridedBox(m, 0, 64, 1, 0, 32, 32, 32), false}}), Preds{1});
}

TEST(RegionIndexTest, TransposedAndOffsetViewsCompareExactly) {
  float k[128 * 64];  // K: 128 rows of 64
  Tasks t;
  EXPECT_EQ(t.Add({{StridedBox(k, 0, 64, 1, 32, 0, 32, 64), true}}), Preds{});  // 0 writes K rows 32-63
  // K^T (64 x 128, strides (1, 64)): columns 32-63 of K^T are rows 32-63 of K.
  EXPECT_EQ(t.Add({{StridedBox(k, 0, 1, 64, 0, 32, 64, 32), false}}), Preds{0});
  EXPECT_EQ(t.Add({{StridedBox(k, 0, 1, 64, 0, 64, 64, 32), false}}), Preds{});
  // A view starting at row 32, column 16: its rows 0-1, columns 0-7 are K[32:34, 16:24].
  EXPECT_EQ(t.Add({{StridedBox(k, 32 * 64 + 16, 64, 1, 0, 0, 2, 8), false}}), Preds{0});
  EXPECT_EQ(t.Add({{StridedBox(k, 64 * 64 + 16, 64, 1, 0, 0, 2, 8), false}}), Preds{});
  // Rows 64-127 through a view: after the two reads of rows 64-95 and 64-65 (WAR).
  EXPECT_EQ(t.Add({{StridedBox(k, 64 * 64, 64, 1, 0, 0, 64, 64), true}}), (Preds{2, 4}));
  EXPECT_EQ(t.Add({{StridedBox(k, 0, 64, 1, 100, 0, 1, 64), false}}), Preds{5});
}

TEST(RegionIndexTest, AliasingViewsFallBackToByteRanges) {
  float m[64 * 64];
  Tasks t;
  EXPECT_EQ(t.Add({{StridedBox(m, 0, 64, 1, 1, 0, 1, 64), true}}), Preds{});  // row 1
  // A view with rows 32 elements apart: its row 1, columns 40-63 is row 1, columns 8-31 of m, and
  // its row 0, columns 40-63 is row 0 of m.
  EXPECT_EQ(t.Add({{StridedBox(m, 0, 32, 1, 1, 40, 1, 24), false}}), Preds{0});
  EXPECT_EQ(t.Add({{StridedBox(m, 0, 32, 1, 0, 40, 1, 24), false}}), Preds{});
  // A zero stride (a broadcast view) reads the whole byte range.
  EXPECT_EQ(t.Add({{StridedBox(m, 64, 0, 1, 0, 0, 8, 64), false}}), Preds{0});
}

TEST(RegionIndexTest, DifferentBuffersNeverConflict) {
  float a[256], b[256];
  Tasks t;
  EXPECT_EQ(t.Add({{StridedBox(a, 0, 16, 1, 0, 0, 16, 16), true}}), Preds{});
  EXPECT_EQ(t.Add({{StridedBox(b, 0, 16, 1, 0, 0, 16, 16), true}}), Preds{});
  EXPECT_EQ(t.Add({{StridedBox(a, 0, 16, 1, 0, 0, 16, 16), false}}), Preds{0});
}

TEST(RegionIndexTest, ResetForgetsEarlierTasks) {
  float m[64 * 64], other[64 * 64];
  Tasks t;
  EXPECT_EQ(t.Add({{StridedBox(m, 0, 64, 1, 0, 0, 32, 64), true}}), Preds{});
  EXPECT_EQ(t.Add({{StridedBox(m, 0, 64, 1, 0, 0, 32, 64), false}, {StridedBox(other, 0, 64, 1, 0, 0, 8, 8), true}}),
            Preds{0});
  EXPECT_EQ(t.index().num_handles(), 0u);
  t.index().handle(StridedBox(m, 0, 64, 1, 0, 0, 64, 64));
  EXPECT_EQ(t.index().num_handles(), 1u);
  t.Reset();
  EXPECT_EQ(t.index().num_handles(), 0u);
  // The same box again, through a kept layout record, buffer and box: no task is remembered.
  EXPECT_EQ(t.Add({{StridedBox(m, 0, 64, 1, 0, 0, 32, 64), false}}), Preds{});
  EXPECT_EQ(t.Add({{StridedBox(other, 0, 64, 1, 0, 0, 8, 8), false}}), Preds{});
  EXPECT_EQ(t.Add({{StridedBox(m, 0, 64, 1, 0, 0, 32, 64), true}}), Preds{0});
}

TEST(RegionIndexTest, InvalidBoxesAreReportedBeforeAnythingIsRecorded) {
  float m[16 * 16];
  RegionIndex index;
  const pypto_region r = StridedBox(m, 0, 16, 1, 0, 0, 4, 4);
  const int64_t offset[2] = {0, 0}, good[2] = {4, 4}, negative[2] = {4, -1};
  const RegionAccess ok{index.intern(r), offset, good, true};
  const RegionAccess bad{index.intern(r), offset, negative, false};
  const RegionAccess accesses[2] = {ok, bad};
  std::vector<int64_t> preds;
  EXPECT_EQ(index.add_task(accesses, 2, 0, preds), 1);
  EXPECT_EQ(index.num_nodes(), 0u);
  pypto_region null_base = r;
  null_base.base = nullptr;
  null_base.buffer = m;
  const RegionAccess null_access{index.intern(null_base), offset, good, false};
  EXPECT_EQ(index.add_task(&null_access, 1, 0, preds), 0);
  EXPECT_EQ(index.add_task(&ok, 1, 0, preds), -1);
  EXPECT_EQ(index.num_nodes(), 1u);
}

TEST(RegionIndexTest, EmptyRegionsHaveNoDependencies) {
  float m[256];
  Tasks t;
  EXPECT_EQ(t.Add({{StridedBox(m, 0, 16, 1, 0, 0, 16, 16), true}}), Preds{});
  EXPECT_EQ(t.Add({{StridedBox(m, 0, 16, 1, 0, 0, 0, 16), true}}), Preds{});
}

// A run that repeats the last one keeps its boxes, and forgets only the tasks; a run that leaves a
// box unaccessed drops the boxes of that allocation at the next reset, and one that leaves an
// allocation unused drops everything.
TEST(RegionIndexTest, RepeatedRunsKeepBoxesButNotTasks) {
  float m[64 * 64], other[64 * 64];
  auto run = [&](Tasks& t, int rows) {
    std::vector<Preds> preds;
    for (int r = 0; r < 64; r += rows) {
      preds.push_back(t.Add({{StridedBox(m, 0, 64, 1, r, 0, rows, 64), true}}));
      preds.push_back(t.Add({{StridedBox(m, 0, 64, 1, r, 0, rows, 64), false},
                             {StridedBox(m, 0, 1, 64, 0, r, 64, rows), false},
                             {StridedBox(other, 0, 64, 1, r, 0, rows, 64), true}}));
      preds.push_back(t.Add({{StridedBox(m, 0, 64, 1, 0, 0, 64, 64), false}}));
    }
    return preds;
  };
  Tasks fresh;
  const std::vector<Preds> by16 = run(fresh, 16);
  Tasks t;
  EXPECT_EQ(run(t, 16), by16);
  const size_t nodes = t.index().num_nodes();
  t.Reset();
  EXPECT_EQ(t.index().num_nodes(), nodes);
  EXPECT_EQ(run(t, 16), by16);
  // Other boxes of the same tensors: the kept ones (no tasks) sit beside them until the next reset.
  t.Reset();
  Tasks fresh8;
  EXPECT_EQ(run(t, 8), run(fresh8, 8));
  t.Reset();
  EXPECT_LT(t.index().num_nodes(), 2 * nodes);
  EXPECT_EQ(run(t, 16), by16);
  // A run that leaves `other` unused: everything is forgotten at the next reset.
  t.Reset();
  EXPECT_EQ(t.Add({{StridedBox(m, 0, 64, 1, 0, 0, 16, 64), true}}), Preds{});
  t.Reset();
  EXPECT_EQ(t.index().num_nodes(), 0u);
  EXPECT_EQ(run(t, 16), by16);
}

// Random tasks over one matrix through row-major and transposed views: the index finds exactly the
// conflicts a brute-force check of element sets finds, up to edges implied transitively. Each task
// makes 1 to `max_accesses` accesses; with `pool` > 0 boxes are drawn from that many fixed boxes, so
// exact repeats (the index's memo fast path) are frequent. With `tiles`, the pool is the 30 disjoint
// 4 x 4 tiles of the matrix instead, revisited in random order (the layouts' box tables). Of every
// three rounds, the second repeats the first and adds tasks, and the third repeats the second, so
// that runs also start from boxes kept from the run before.
void CheckAgainstBruteForce(unsigned seed, int max_accesses, int pool, bool tiles = false, bool accum = false) {
  constexpr int kRows = 24, kCols = 20;
  float m[kRows * kCols];
  std::mt19937 rng(seed);
  struct Box {
    int r0, c0, rows, cols;
    bool transposed;
  };
  auto random_box = [&] {
    const int r0 = static_cast<int>(rng() % kRows), c0 = static_cast<int>(rng() % kCols);
    return Box{r0, c0, 1 + static_cast<int>(rng() % (kRows - r0)), 1 + static_cast<int>(rng() % (kCols - c0)),
               rng() % 2 == 0};
  };
  // One index for every round, reset in between: what an earlier round left (layouts, memos,
  // buffers and boxes kept for reuse) must not leak into the next.
  Tasks t;
  struct Draw {
    std::vector<std::pair<pypto_region, Mode>> acc;
    std::set<int> rd, wr, ac;
  };
  std::vector<Draw> draws;
  for (int round = 0; round < 3 * test::Thinned(7); ++round) {
    std::vector<Box> boxes;
    if (tiles) {
      for (int r = 0; r < kRows; r += 4) {
        for (int c = 0; c < kCols; c += 4) boxes.push_back(Box{r, c, 4, 4, rng() % 2 == 0});
      }
      pool = static_cast<int>(boxes.size());
    }
    for (int i = static_cast<int>(boxes.size()); i < pool; ++i) boxes.push_back(random_box());
    t.Reset();
    if (round % 3 == 0) draws.clear();
    const int new_tasks = round % 3 == 0 ? 150 : round % 3 == 1 ? 50 : 0;
    for (int i = 0; i < new_tasks; ++i) {
      std::vector<std::pair<pypto_region, Mode>> acc;
      std::set<int> rd, wr, ac;
      const int n = 1 + static_cast<int>(rng() % static_cast<unsigned>(max_accesses));
      for (int k = 0; k < n; ++k) {
        const Box b = pool > 0 ? boxes[rng() % static_cast<unsigned>(pool)] : random_box();
        const unsigned roll = rng() % 3;
        const Mode mode = roll == 0 ? kWrite : accum && roll == 1 ? kAccum : kRead;
        acc.emplace_back(b.transposed ? StridedBox(m, 0, 1, kCols, b.c0, b.r0, b.cols, b.rows)
                                      : StridedBox(m, 0, kCols, 1, b.r0, b.c0, b.rows, b.cols),
                         mode);
        std::set<int>& elems = mode == kWrite ? wr : mode == kAccum ? ac : rd;
        for (int y = b.r0; y < b.r0 + b.rows; ++y) {
          for (int x = b.c0; x < b.c0 + b.cols; ++x) elems.insert(y * kCols + x);
        }
      }
      draws.push_back(Draw{std::move(acc), std::move(rd), std::move(wr), std::move(ac)});
    }
    // Per task: the elements it reads and the elements it writes.
    std::vector<std::set<int>> reads, writes, accums;
    std::vector<std::vector<int64_t>> preds_of;
    for (const Draw& d : draws) {
      preds_of.push_back(t.AddModes(d.acc));
      reads.push_back(d.rd);
      writes.push_back(d.wr);
      accums.push_back(d.ac);
    }
    auto shares = [](const std::set<int>& a, const std::set<int>& b) {
      for (int x : a) {
        if (b.count(x)) return true;
      }
      return false;
    };
    // Tasks i and j conflict when one writes an element the other reads, writes or accumulates into,
    // or one accumulates into an element the other reads (two accumulations commute).
    auto conflict = [&](size_t i, size_t j) {
      return shares(writes[i], writes[j]) || shares(writes[i], reads[j]) || shares(reads[i], writes[j]) ||
             shares(writes[i], accums[j]) || shares(accums[i], writes[j]) || shares(reads[i], accums[j]) ||
             shares(accums[i], reads[j]);
    };
    // reach[i] = tasks that task i is ordered after (transitively).
    std::vector<std::set<int64_t>> reach(preds_of.size());
    for (size_t i = 0; i < preds_of.size(); ++i) {
      for (int64_t p : preds_of[i]) {
        ASSERT_LT(p, static_cast<int64_t>(i));
        EXPECT_TRUE(conflict(i, static_cast<size_t>(p))) << "edge " << p << " -> " << i << " joins tasks that do not conflict";
        reach[i].insert(p);
        reach[i].insert(reach[static_cast<size_t>(p)].begin(), reach[static_cast<size_t>(p)].end());
      }
      for (size_t j = 0; j < i; ++j) {
        if (conflict(i, j)) EXPECT_TRUE(reach[i].count(static_cast<int64_t>(j))) << "missing order " << j << " -> " << i;
      }
    }
  }
}

TEST(RegionIndexTest, MatchesBruteForceOnRandomBoxes) { CheckAgainstBruteForce(7, 1, 0); }

TEST(RegionIndexTest, MatchesBruteForceOnRandomMultiRegionTasks) { CheckAgainstBruteForce(11, 4, 0); }

// Reads, writes and accumulations, on random boxes, pooled boxes (the memo fast path) and tiles.
TEST(RegionIndexTest, MatchesBruteForceWithAccumulations) {
  for (unsigned seed : {21u, 22u}) {
    CheckAgainstBruteForce(seed, 3, 0, false, true);
    CheckAgainstBruteForce(seed + 10, 2, 6, false, true);
    CheckAgainstBruteForce(seed + 20, 3, 0, true, true);
  }
}

// Boxes drawn from a small pool repeat exactly, so most accesses take the memo fast path; the
// pool's boxes overlap each other, which must turn the fast path off for them.
TEST(RegionIndexTest, MatchesBruteForceOnRepeatedBoxes) {
  for (unsigned seed : {1u, 2u, 3u}) {
    CheckAgainstBruteForce(seed, 3, 3);
    CheckAgainstBruteForce(seed + 10, 2, 8);
  }
}

// Disjoint tiles revisited in random order, through a row-major and a transposed layout: most
// accesses are found in the layouts' box tables, which grow past their initial size.
TEST(RegionIndexTest, MatchesBruteForceOnRevisitedTiles) {
  for (unsigned seed : {4u, 5u, 6u}) CheckAgainstBruteForce(seed, 3, 0, true);
}

// Random tasks over one matrix through views of several layouts: row-major and transposed (one
// canonical layout), its rows cut into chunks of 4 (a second layout), its column halves first (a
// third), an offset view, and rows that alias each other (byte ranges). Boxes of the primary layout
// are found by their rows and the others by their bytes; every conflicting pair of tasks must be
// ordered, and an edge may join tasks only where their accesses' byte hulls conflict (boxes of
// different layouts compare by byte range).
void CheckLayoutsAgainstBruteForce(unsigned seed, int tasks_per_round) {
  constexpr int kRows = 24, kCols = 20;
  float m[kRows * kCols];
  struct View {
    int ndim;
    int64_t base;
    int64_t shape[3];
    int64_t stride[3];
  };
  const View views[] = {
      {2, 0, {kRows, kCols}, {kCols, 1}},          {2, 0, {kCols, kRows}, {1, kCols}},
      {3, 0, {kRows / 4, 4, kCols}, {4 * kCols, kCols, 1}}, {3, 0, {4, kRows / 4, kCols}, {kCols, 4 * kCols, 1}},
      {3, 0, {2, kRows, kCols / 2}, {kCols / 2, kCols, 1}}, {2, 7, {kRows, kCols / 2}, {kCols, 1}},
      {2, 0, {kRows - 1, 2 * kCols}, {kCols, 1}},
  };
  constexpr int kViews = sizeof(views) / sizeof(views[0]);
  std::mt19937 rng(seed);
  Tasks t;
  for (int round = 0; round < 6; ++round) {
    t.Reset();
    std::vector<std::set<int>> reads, writes, accums, hull_reads, hull_writes, hull_accums;
    std::vector<Preds> preds_of;
    for (int i = 0; i < tasks_per_round; ++i) {
      std::vector<std::pair<pypto_region, Mode>> acc;
      std::set<int> sets[3], hulls[3];
      const int n = 1 + static_cast<int>(rng() % 3);
      for (int k = 0; k < n; ++k) {
        const View& v = views[rng() % kViews];
        pypto_region r{};
        r.buffer = m;
        r.base = m + v.base;
        r.ndim = v.ndim;
        r.elem_size = 4;
        for (int d = 0; d < v.ndim; ++d) {
          r.offset[d] = static_cast<int64_t>(rng() % static_cast<unsigned>(v.shape[d]));
          // Mostly small boxes, so the grids have something to skip.
          const int64_t room = v.shape[d] - r.offset[d];
          r.extent[d] = 1 + static_cast<int64_t>(rng() % static_cast<unsigned>(rng() % 4 == 0 ? room : std::min<int64_t>(room, 3)));
          r.stride[d] = v.stride[d];
        }
        const unsigned roll = rng() % 3;
        const Mode mode = roll == 0 ? kWrite : roll == 1 ? kAccum : kRead;
        acc.emplace_back(r, mode);
        int lo = INT32_MAX, hi = -1;
        int64_t idx[3] = {0, 0, 0};
        for (bool more = true; more;) {
          int64_t e = v.base;
          for (int d = 0; d < v.ndim; ++d) e += (r.offset[d] + idx[d]) * v.stride[d];
          sets[mode].insert(static_cast<int>(e));
          lo = std::min(lo, static_cast<int>(e));
          hi = std::max(hi, static_cast<int>(e));
          more = false;
          for (int d = v.ndim - 1; d >= 0 && !more; --d) {
            if (++idx[d] < r.extent[d]) more = true;
            else idx[d] = 0;
          }
        }
        for (int e = lo; e <= hi; ++e) hulls[mode].insert(e);
      }
      preds_of.push_back(t.AddModes(acc));
      reads.push_back(sets[kRead]);
      writes.push_back(sets[kWrite]);
      accums.push_back(sets[kAccum]);
      hull_reads.push_back(hulls[kRead]);
      hull_writes.push_back(hulls[kWrite]);
      hull_accums.push_back(hulls[kAccum]);
    }
    auto shares = [](const std::set<int>& a, const std::set<int>& b) {
      for (int x : a) {
        if (b.count(x)) return true;
      }
      return false;
    };
    auto conflict = [&](const auto& r, const auto& w, const auto& a, size_t i, size_t j) {
      return shares(w[i], w[j]) || shares(w[i], r[j]) || shares(r[i], w[j]) || shares(w[i], a[j]) ||
             shares(a[i], w[j]) || shares(r[i], a[j]) || shares(a[i], r[j]);
    };
    std::vector<std::set<int64_t>> reach(preds_of.size());
    for (size_t i = 0; i < preds_of.size(); ++i) {
      for (int64_t p : preds_of[i]) {
        ASSERT_LT(p, static_cast<int64_t>(i));
        EXPECT_TRUE(conflict(hull_reads, hull_writes, hull_accums, i, static_cast<size_t>(p)))
            << "edge " << p << " -> " << i << " joins tasks whose byte ranges do not conflict";
        reach[i].insert(p);
        reach[i].insert(reach[static_cast<size_t>(p)].begin(), reach[static_cast<size_t>(p)].end());
      }
      for (size_t j = 0; j < i; ++j) {
        if (conflict(reads, writes, accums, i, j)) {
          ASSERT_TRUE(reach[i].count(static_cast<int64_t>(j))) << "missing order " << j << " -> " << i << " (round " << round << ")";
        }
      }
    }
  }
}

TEST(RegionIndexTest, ViewsOfSeveralLayoutsMatchBruteForce) {
  for (unsigned seed : {31u, 32u, 33u}) CheckLayoutsAgainstBruteForce(seed, test::Thinned(150));
  // Enough tasks that superseded nodes are swept and the grids rebuilt.
  CheckLayoutsAgainstBruteForce(35u, 500);
}

// Tiles of one power-of-two extent are kept in a dense grid per layout; past its bound of tiles the
// grid's boxes move to the layout's hash table, where later accesses still find them.
TEST(RegionIndexTest, TilesBeyondTheGridBoundAreStillFound) {
  constexpr int64_t kTiles = 20000;
  std::vector<float> x(2 * kTiles);
  Tasks t;
  // Each pass visits every 2-element tile: a write, two reads, a write.
  for (int64_t i = 0; i < kTiles; ++i) ASSERT_EQ(t.Add({{StridedBox(x.data(), 0, 2, 1, i, 0, 1, 2), true}}), Preds{});
  for (int pass = 1; pass <= 3; ++pass) {
    for (int64_t i = 0; i < kTiles; ++i) {
      const Preds preds = t.Add({{StridedBox(x.data(), 0, 2, 1, i, 0, 1, 2), pass == 3}});
      const Preds want = pass < 3 ? Preds{i} : Preds{i, i + kTiles, i + 2 * kTiles};
      ASSERT_EQ(preds, want) << "pass " << pass << " tile " << i;
    }
  }
  // Tiles of another extent beside them, and unaligned boxes, on the same layout.
  EXPECT_EQ(t.Add({{StridedBox(x.data(), 0, 2, 1, 4, 0, 2, 2), false}}), (Preds{4 + 3 * kTiles, 5 + 3 * kTiles}));
  EXPECT_EQ(t.Add({{StridedBox(x.data(), 0, 2, 1, 4, 0, 2, 2), true}}), (Preds{4 + 3 * kTiles, 5 + 3 * kTiles, 4 * kTiles}));
}

// A zero-dim region (a scalar) is one element: its accesses conflict like any box's, also when they
// repeat and are looked up in its layout's box table.
TEST(RegionIndexTest, ZeroDimRegionsConflict) {
  float x = 0;
  pypto_region r{};
  r.base = &x;
  r.elem_size = 4;
  // The same element as a one-element vector: its node overlaps the scalar's, so scalar accesses
  // cannot take the memo path and go through the box table.
  pypto_region v = r;
  v.ndim = 1;
  v.extent[0] = 1;
  v.stride[0] = 1;
  Tasks t;
  EXPECT_EQ(t.Add({{v, true}}), Preds{});
  EXPECT_EQ(t.Add({{r, true}}), Preds{0});
  // The two views have different layouts, so the scalar write does not supersede the vector's
  // node: later accesses also name its writer, an edge the write implies anyway.
  for (int64_t i = 2; i <= 4; ++i) EXPECT_EQ(t.Add({{r, false}}), (Preds{0, 1}));
  EXPECT_EQ(t.Add({{r, true}}), (Preds{0, 1, 2, 3, 4}));
  EXPECT_EQ(t.Add({{v, false}}), (Preds{0, 5}));
}

TEST(RegionIndexTest, FinishedTasksArePrunedSoTheIndexStaysSmall) {
  float w[64 * 64];
  std::vector<float> x(4096 * 64);
  Tasks t;
  int64_t done_below = 0;
  t.index().set_finished([&](int64_t seq) { return seq < done_below; });
  for (int64_t i = 0; i < 4096; ++i) {
    // Every task reads the shared weight and writes its own row of x.
    t.Add({{StridedBox(w, 0, 64, 1, 0, 0, 64, 64), false}, {StridedBox(x.data(), 0, 64, 1, i, 0, 1, 64), true}});
    done_below = i - 8;
  }
  EXPECT_LT(t.index().num_nodes(), 600u);
}

}  // namespace
}  // namespace pypto::runtime
