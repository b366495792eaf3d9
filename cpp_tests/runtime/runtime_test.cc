#include "runtime/runtime.h"

#include "runtime/memory.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "test_regions.h"

namespace pypto::runtime {
namespace {

using std::chrono::milliseconds;

using testing::Region1D;
using testing::Region2D;

// Records the order in which tasks ran; tasks run on several threads.
class Log {
 public:
  void Add(const std::string& s) {
    std::lock_guard<std::mutex> lock(mu_);
    entries_.push_back(s);
  }
  std::vector<std::string> Entries() {
    std::lock_guard<std::mutex> lock(mu_);
    return entries_;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> entries_;
};

TaskFn Logging(Log* log, std::string label, int sleep_ms = 0) {
  return [log, label, sleep_ms](const pypto_region*, int32_t) {
    if (sleep_ms > 0) std::this_thread::sleep_for(milliseconds(sleep_ms));
    log->Add(label);
  };
}

void Submit(Runtime& rt, const std::string& name, TaskFn fn, const std::vector<pypto_region>& inputs,
            const std::vector<pypto_region>& outputs) {
  rt.submit_regions(name, std::move(fn), inputs, outputs);
}

TEST(RuntimeTest, ReadAfterWriteWaitsForWriter) {
  Runtime rt(4);
  float buf[16];
  Log log;
  RunStats stats = rt.run([&](const pypto_runtime_api*) {
    Submit(rt, "writer", Logging(&log, "w", 30), {}, {Region1D(buf, 0, 16)});
    Submit(rt, "reader", Logging(&log, "r"), {Region1D(buf, 4, 4)}, {});
  });
  EXPECT_EQ(log.Entries(), (std::vector<std::string>{"w", "r"}));
  EXPECT_EQ(stats.tasks, 2);
  EXPECT_EQ(stats.edges, 1);
}

TEST(RuntimeTest, WriteAfterReadWaitsForReaders) {
  Runtime rt(4);
  float buf[16];
  Log log;
  RunStats stats = rt.run([&](const pypto_runtime_api*) {
    Submit(rt, "reader0", Logging(&log, "r", 30), {Region1D(buf, 0, 8)}, {});
    Submit(rt, "reader1", Logging(&log, "r", 30), {Region1D(buf, 8, 8)}, {});
    Submit(rt, "writer", Logging(&log, "w"), {}, {Region1D(buf, 0, 16)});
  });
  EXPECT_EQ(log.Entries(), (std::vector<std::string>{"r", "r", "w"}));
  EXPECT_EQ(stats.edges, 2);
}

TEST(RuntimeTest, WriteAfterWriteKeepsOrder) {
  Runtime rt(4);
  float buf[16];
  Log log;
  RunStats stats = rt.run([&](const pypto_runtime_api*) {
    Submit(rt, "w1", Logging(&log, "w1", 30), {}, {Region1D(buf, 0, 8)});
    Submit(rt, "w2", Logging(&log, "w2"), {}, {Region1D(buf, 4, 8)});
  });
  EXPECT_EQ(log.Entries(), (std::vector<std::string>{"w1", "w2"}));
  EXPECT_EQ(stats.edges, 1);
}

TEST(RuntimeTest, DisjointRegionsOfOneBufferHaveNoEdge) {
  Runtime rt(4);
  float buf[8 * 8];
  RunStats stats = rt.run([&](const pypto_runtime_api*) {
    // Four 4x4 tiles of an 8x8 matrix, each written then read, plus reads of a shared tile.
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 2; ++j) {
        Submit(rt, "tile", [](const pypto_region*, int32_t) {}, {}, {Region2D(buf, 4 * i, 4 * j, 4, 4, 8)});
      }
    }
    Submit(rt, "read_a", [](const pypto_region*, int32_t) {}, {Region1D(buf + 64, 0, 0)}, {});
  });
  EXPECT_EQ(stats.tasks, 5);
  EXPECT_EQ(stats.edges, 0);

  float other[8];
  stats = rt.run([&](const pypto_runtime_api*) {
    // Read-after-read never orders tasks, and distinct buffers are independent.
    Submit(rt, "r1", [](const pypto_region*, int32_t) {}, {Region1D(buf, 0, 8)}, {});
    Submit(rt, "r2", [](const pypto_region*, int32_t) {}, {Region1D(buf, 0, 8)}, {});
    Submit(rt, "w_other", [](const pypto_region*, int32_t) {}, {}, {Region1D(other, 0, 8)});
  });
  EXPECT_EQ(stats.edges, 0);
}

TEST(RuntimeTest, PartialOverlapCreatesEdge) {
  Runtime rt(2);
  float buf[8 * 8];
  RunStats stats = rt.run([&](const pypto_runtime_api*) {
    Submit(rt, "w", [](const pypto_region*, int32_t) {}, {}, {Region2D(buf, 0, 0, 4, 4, 8)});
    // Shares only element (3, 3) with the first tile.
    Submit(rt, "r", [](const pypto_region*, int32_t) {}, {Region2D(buf, 3, 3, 4, 4, 8)}, {});
  });
  EXPECT_EQ(stats.edges, 1);
}

TEST(RuntimeTest, EdgesToTheSamePredecessorAreDeduplicated) {
  Runtime rt(2);
  float buf[16];
  RunStats stats = rt.run([&](const pypto_runtime_api*) {
    Submit(rt, "w", [](const pypto_region*, int32_t) {}, {}, {Region1D(buf, 0, 16)});
    Submit(rt, "r", [](const pypto_region*, int32_t) {}, {Region1D(buf, 0, 4), Region1D(buf, 8, 4)},
           {Region1D(buf, 12, 4)});
  });
  EXPECT_EQ(stats.edges, 1);
}

TEST(RuntimeTest, OverlapTest) {
  float buf[64];
  float other[64];
  // Same layout: N-D boxes in index space.
  EXPECT_TRUE(regions_overlap(Region2D(buf, 0, 0, 2, 2, 8), Region2D(buf, 1, 1, 2, 2, 8)));
  EXPECT_FALSE(regions_overlap(Region2D(buf, 0, 0, 2, 2, 8), Region2D(buf, 0, 2, 2, 2, 8)));
  // Column blocks interleave in memory but are disjoint boxes.
  EXPECT_FALSE(regions_overlap(Region2D(buf, 0, 0, 8, 1, 8), Region2D(buf, 0, 1, 8, 1, 8)));
  EXPECT_FALSE(regions_overlap(Region1D(buf, 0, 8), Region1D(other, 0, 8)));
  EXPECT_FALSE(regions_overlap(Region1D(buf, 0, 0), Region1D(buf, 0, 8)));
  // Different layouts fall back to byte ranges: row 1 of an 8-wide matrix is elements [8, 16).
  EXPECT_TRUE(regions_overlap(Region2D(buf, 1, 0, 1, 8, 8), Region1D(buf, 15, 4)));
  EXPECT_FALSE(regions_overlap(Region2D(buf, 1, 0, 1, 8, 8), Region1D(buf, 16, 4)));
  // The byte-range fallback is conservative: a column still spans its rows.
  EXPECT_TRUE(regions_overlap(Region2D(buf, 0, 0, 8, 1, 8), Region1D(buf, 3, 1)));
  // Element size matters for byte ranges.
  EXPECT_TRUE(regions_overlap(Region1D(buf, 0, 2, 8), Region1D(buf, 3, 1, 4)));
  EXPECT_FALSE(regions_overlap(Region1D(buf, 0, 2, 8), Region1D(buf, 4, 1, 4)));

  EXPECT_TRUE(region_covers(Region2D(buf, 0, 0, 4, 4, 8), Region2D(buf, 1, 1, 2, 2, 8)));
  EXPECT_FALSE(region_covers(Region2D(buf, 0, 0, 4, 4, 8), Region2D(buf, 1, 1, 4, 2, 8)));
}

// out = out * 31 + i, applied in a chain; any reordering changes the result.
void RunChain(Runtime& rt, int64_t n, uint64_t* value, RunStats* stats) {
  *stats = rt.run([&](const pypto_runtime_api*) {
    for (int64_t i = 0; i < n; ++i) {
      Submit(
          rt, "step",
          [i](const pypto_region* args, int32_t) {
            auto* v = static_cast<uint64_t*>(args[0].base);
            *v = *v * 31 + static_cast<uint64_t>(i);
          },
          {Region1D(value, 0, 1, 8)}, {Region1D(value, 0, 1, 8)});
    }
  });
}

TEST(RuntimeTest, ChainMatchesSequentialOnAnyWorkerCount) {
  uint64_t expected = 1;
  for (uint64_t i = 0; i < 1000; ++i) expected = expected * 31 + i;
  for (int workers : {1, 2, 4, 8}) {
    Runtime rt(workers);
    EXPECT_EQ(rt.num_workers(), workers);
    uint64_t value = 1;
    RunStats stats;
    RunChain(rt, 1000, &value, &stats);
    EXPECT_EQ(value, expected) << "workers=" << workers;
    EXPECT_EQ(stats.tasks, 1000);
    EXPECT_EQ(stats.edges, 999);
  }
}

TEST(RuntimeTest, LongStreamsStayCorrectUnderBackPressure) {
  // More tasks than the in-flight window, to exercise back-pressure and access-map pruning.
  Runtime rt(4);
  constexpr int kTasks = 40000;
  std::vector<int32_t> slots(kTasks, 0);
  int64_t counter = 0;
  RunStats stats = rt.run([&](const pypto_runtime_api*) {
    for (int i = 0; i < kTasks; ++i) {
      Submit(
          rt, "slot", [&slots, i](const pypto_region*, int32_t) { slots[i] = i; }, {},
          {Region1D(slots.data(), i, 1)});
      Submit(
          rt, "count", [&counter](const pypto_region*, int32_t) { ++counter; }, {}, {Region1D(&counter, 0, 1, 8)});
    }
  });
  EXPECT_EQ(stats.tasks, 2 * kTasks);
  EXPECT_EQ(counter, kTasks);
  for (int i = 0; i < kTasks; ++i) ASSERT_EQ(slots[i], i);
}

TEST(RuntimeTest, TaskExceptionFailsRunAndRuntimeStaysUsable) {
  Runtime rt(4);
  float buf[16];
  std::atomic<int> after{0};
  try {
    rt.run([&](const pypto_runtime_api*) {
      Submit(
          rt, "boom",
          [](const pypto_region*, int32_t) {
            std::this_thread::sleep_for(milliseconds(10));
            throw std::runtime_error("bad thing");
          },
          {}, {Region1D(buf, 0, 16)});
      // Depends on the failing task, so it must be cancelled.
      Submit(rt, "after", [&](const pypto_region*, int32_t) { ++after; }, {Region1D(buf, 0, 16)}, {});
    });
    FAIL() << "expected TaskError";
  } catch (const TaskError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("task 0 (boom) failed"), std::string::npos) << msg;
    EXPECT_NE(msg.find("bad thing"), std::string::npos) << msg;
  }
  EXPECT_EQ(after.load(), 0);
  EXPECT_TRUE(rt.failed());

  uint64_t value = 1;
  RunStats stats;
  RunChain(rt, 100, &value, &stats);
  EXPECT_FALSE(rt.failed());
  EXPECT_EQ(stats.tasks, 100);
}

TEST(RuntimeTest, NonStdExceptionIsReportedAsUnknown) {
  Runtime rt(2);
  try {
    rt.run([&](const pypto_runtime_api*) { Submit(rt, "odd", [](const pypto_region*, int32_t) { throw 42; }, {}, {}); });
    FAIL() << "expected TaskError";
  } catch (const TaskError& e) {
    EXPECT_NE(std::string(e.what()).find("(odd) failed: unknown exception"), std::string::npos) << e.what();
  }
}

TEST(RuntimeTest, FirstFailureWinsAndLaterTasksAreCancelled) {
  Runtime rt(2);  // one worker runs the failing task while the orchestration waits
  float buf[4];
  // A 64 KiB region: a run wakes its sleeping workers only once its tasks' regions reach that much
  // (smaller runs stay on the calling thread, which here is busy waiting).
  std::vector<float> big(16384);
  std::atomic<int> ran{0};
  EXPECT_THROW(rt.run([&](const pypto_runtime_api*) {
    Submit(rt, "first", [](const pypto_region*, int32_t) { throw std::runtime_error("first"); },
           {Region1D(big.data(), 0, 16384)}, {});
    // Orchestration may observe the failure and stop early; tasks submitted after it never run.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!rt.failed() && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    ASSERT_TRUE(rt.failed());
    for (int i = 0; i < 10; ++i) {
      Submit(rt, "late", [&](const pypto_region*, int32_t) { ++ran; }, {}, {Region1D(buf, 0, 4)});
    }
  }),
               TaskError);
  EXPECT_EQ(ran.load(), 0);
}

TEST(RuntimeTest, OrchestrationExceptionIsRethrown) {
  Runtime rt(2);
  std::atomic<int> ran{0};
  float buf[4];
  EXPECT_THROW(rt.run([&](const pypto_runtime_api*) {
    Submit(rt, "ok", [&](const pypto_region*, int32_t) { ++ran; }, {}, {Region1D(buf, 0, 4)});
    throw std::logic_error("orchestration broke");
  }),
               std::logic_error);
  // The task submitted before the exception may or may not have started, but the run drained.
  EXPECT_LE(ran.load(), 1);
  uint64_t value = 1;
  RunStats stats;
  RunChain(rt, 10, &value, &stats);
  EXPECT_EQ(stats.tasks, 10);
}

TEST(RuntimeTest, MisuseIsReported) {
  Runtime rt(1);
  // A descriptor without a kernel (and no C++ body), and a negative buffer size.
  EXPECT_THROW(rt.run([&](const pypto_runtime_api*) {
    pypto_task_desc d{};
    d.name = "t";
    rt.submit_desc(d);
  }),
               std::invalid_argument);
  EXPECT_THROW(rt.run([&](const pypto_runtime_api*) {
    rt.submit_regions("t", [](const pypto_region*, int32_t) {}, {}, {}, -1);
  }),
               std::invalid_argument);
  // More regions than a task takes.
  float buf[4];
  std::vector<pypto_region> many(kMaxTaskRegions + 1, Region1D(buf, 0, 4));
  EXPECT_THROW(rt.run([&](const pypto_runtime_api*) { rt.submit_regions("t", [](const pypto_region*, int32_t) {}, many, {}); }),
               std::invalid_argument);
}

// C kernels: dst[i] = src[i] * scalars[0] + scalars[1].
int32_t AxpbKernel(const pypto_region* args, int32_t nargs, const int64_t* scalars, int32_t nscalars) {
  if (nargs != 2 || nscalars != 2) return 1;
  const auto* src = static_cast<const float*>(args[0].base) + args[0].offset[0];
  auto* dst = static_cast<float*>(args[1].base) + args[1].offset[0];
  for (int64_t i = 0; i < args[0].extent[0]; ++i) dst[i] = src[i] * scalars[0] + scalars[1];
  return 0;
}

int32_t FailingKernel(const pypto_region*, int32_t, const int64_t*, int32_t) { return 3; }

// Runs a three-task graph that `submit` builds on x = 0..7 and y: y = 2x + 1 by halves, then y *= 10
// in place (two edges), and checks the result.
void RunAxpbGraph(Runtime& rt, const std::function<void(const pypto_runtime_api*, float*, float*)>& submit) {
  float x[8];
  float y[8];
  for (int i = 0; i < 8; ++i) x[i] = static_cast<float>(i);
  RunStats stats = rt.run([&](const pypto_runtime_api* api) {
    ASSERT_EQ(api->abi_version, PYPTO_ABI_VERSION);
    submit(api, x, y);
    EXPECT_EQ(api->failed(api->rt), 0);
  });
  EXPECT_EQ(stats.tasks, 3);
  EXPECT_EQ(stats.edges, 2);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(y[i], (2.0f * i + 1.0f) * 10.0f);
}

TEST(RuntimeTest, AFailingKernelFailsTheRunNamingTheTask) {
  Runtime rt(2);
  try {
    rt.run([&](const pypto_runtime_api* api) {
      const pypto_task_desc d = {"bad_kernel", &FailingKernel, 0, nullptr, nullptr, 0, 0};
      api->task_submit_desc(api->rt, &d);
    });
    FAIL() << "expected TaskError";
  } catch (const TaskError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("(bad_kernel)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("kernel returned status 3"), std::string::npos) << msg;
  }
}

// A 1-D float tensor of n elements, as generated code passes it.
pypto_tensor Tensor1D(float* data, int64_t n) {
  pypto_tensor t{};
  t.data = data;
  t.ndim = 1;
  t.elem_size = sizeof(float);
  t.shape[0] = n;
  t.stride[0] = 1;
  return t;
}

// A three-task graph of C kernels, submitted one task per call through tensor handles.
TEST(RuntimeTest, TaskDescriptorsThroughTheCApi) {
  Runtime rt(2);
  RunAxpbGraph(rt, [](const pypto_runtime_api* api, float* x, float* y) {
    const pypto_tensor tx = Tensor1D(x, 8), ty = Tensor1D(y, 8);
    const int32_t hx = api->tensor_handle(api->rt, &tx);
    const int32_t hy = api->tensor_handle(api->rt, &ty);
    EXPECT_NE(hx, hy);
    EXPECT_EQ(api->tensor_handle(api->rt, &tx), hx);  // one layout, one handle
    const int64_t four[] = {4};
    for (int64_t half = 0; half < 2; ++half) {
      const int64_t off[] = {4 * half};
      const pypto_task_arg args[] = {{hx, PYPTO_ACCESS_IN, off, four}, {hy, PYPTO_ACCESS_OUT, off, four}};
      const int64_t sc[] = {2, 1};
      const pypto_task_desc d = {"axpb", &AxpbKernel, 0, args, sc, 2, 2};
      ASSERT_EQ(api->task_submit_desc(api->rt, &d), 0);
    }
    const int64_t zero[] = {0}, eight[] = {8};
    const pypto_task_arg args[] = {{hy, PYPTO_ACCESS_IN, zero, eight}, {hy, PYPTO_ACCESS_OUT, zero, eight}};
    const int64_t sc[] = {10, 0};
    const pypto_task_desc d = {"scale", &AxpbKernel, 0, args, sc, 2, 2};
    ASSERT_EQ(api->task_submit_desc(api->rt, &d), 0);
  });
}

// Each malformed descriptor fails the run with a message naming the task and what is wrong, and
// the call returns non-zero so that generated code stops.
TEST(RuntimeTest, BadTaskDescriptorsAreReported) {
  float x[8];
  const int64_t zero[] = {0}, four[] = {4}, minus[] = {-1};
  struct Case {
    const char* what;
    int32_t handle;
    int32_t mode;
    const int64_t* extent;
    pypto_kernel_fn fn;
  };
  const Case cases[] = {
      {"tensor handle 7, expected 0 to 0", 7, PYPTO_ACCESS_IN, four, &AxpbKernel},
      {"access mode 4", 0, 4, four, &AxpbKernel},
      {"negative extent -1 in dim 0", 0, PYPTO_ACCESS_IN, minus, &AxpbKernel},
      {"null kernel function", 0, PYPTO_ACCESS_IN, four, nullptr},
  };
  Runtime rt(1);
  for (const Case& c : cases) {
    try {
      rt.run([&](const pypto_runtime_api* api) {
        const pypto_tensor t = Tensor1D(x, 8);
        ASSERT_EQ(api->tensor_handle(api->rt, &t), 0);
        const pypto_task_arg args[] = {{c.handle, c.mode, zero, c.extent}};
        const pypto_task_desc d = {"bad", c.fn, 0, args, nullptr, 1, 0};
        EXPECT_NE(api->task_submit_desc(api->rt, &d), 0);
        EXPECT_NE(api->failed(api->rt), 0);
      });
      ADD_FAILURE() << "expected an error for " << c.what;
    } catch (const std::invalid_argument& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("task 0 (bad)"), std::string::npos) << msg;
      EXPECT_NE(msg.find(c.what), std::string::npos) << msg;
    }
  }
  // A tensor with a bad element size gets no handle.
  EXPECT_THROW(rt.run([&](const pypto_runtime_api* api) {
    pypto_tensor t = Tensor1D(x, 8);
    t.elem_size = 0;
    EXPECT_EQ(api->tensor_handle(api->rt, &t), -1);
  }),
               std::invalid_argument);
}

TEST(RuntimeTest, CApiErrorsDoNotEscapeIntoGeneratedCode) {
  Runtime rt(1);
  EXPECT_THROW(rt.run([&](const pypto_runtime_api* api) {
    EXPECT_NE(api->task_submit_desc(api->rt, nullptr), 0);  // no task
    EXPECT_NE(api->failed(api->rt), 0);
  }),
               std::invalid_argument);
}

TEST(RuntimeTest, WorkspacesAreZeroedAlignedAndLiveUntilTasksFinish) {
  Runtime rt(4);
  int64_t result = 0;
  rt.run([&](const pypto_runtime_api* api) {
    auto* ws = static_cast<int64_t*>(api->alloc_workspace(api->rt, 1000 * sizeof(int64_t)));
    ASSERT_NE(ws, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(ws) % 64, 0u);
    for (int i = 0; i < 1000; ++i) ASSERT_EQ(ws[i], 0);
    auto* odd = static_cast<unsigned char*>(rt.alloc_workspace(3));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(odd) % 64, 0u);
    EXPECT_EQ(odd[0] | odd[1] | odd[2], 0);
    Submit(
        rt, "fill",
        [ws](const pypto_region*, int32_t) {
          std::this_thread::sleep_for(milliseconds(20));
          for (int i = 0; i < 1000; ++i) ws[i] = i;
        },
        {}, {Region1D(ws, 0, 1000, 8)});
    Submit(
        rt, "sum",
        [ws, &result](const pypto_region*, int32_t) {
          for (int i = 0; i < 1000; ++i) result += ws[i];
        },
        {Region1D(ws, 0, 1000, 8)}, {Region1D(&result, 0, 1, 8)});
  });
  EXPECT_EQ(result, 999 * 1000 / 2);
}

TEST(RuntimeTest, LargeWorkspacesComeBackFromTheBlockCache) {
  BlockCache& cache = BlockCache::instance();
  const size_t saved_limit = cache.limit();
  cache.set_limit(size_t{64} << 20);
  constexpr int64_t kBytes = int64_t{3} << 20;
  Runtime rt(2);
  void* first = nullptr;
  void* second = nullptr;
  rt.run([&](const pypto_runtime_api* api) {
    first = api->alloc_workspace(api->rt, kBytes);
    std::memset(first, 0x5a, kBytes);  // a run leaves its workspace dirty
  });
  const int64_t hits = cache.stats().hits;
  rt.run([&](const pypto_runtime_api* api) {
    auto* again = static_cast<unsigned char*>(api->alloc_workspace(api->rt, kBytes - 100));  // same size class
    EXPECT_EQ(static_cast<void*>(again), first);
    for (int64_t i = 0; i < kBytes - 100; ++i) ASSERT_EQ(again[i], 0) << i;
    second = api->alloc_workspace(api->rt, kBytes);
    EXPECT_NE(second, first);  // in use this run: another block
    std::memset(again, 0x5a, kBytes - 100);
    std::memset(second, 0x5a, kBytes);
  });
  rt.run([&](const pypto_runtime_api* api) {
    // A tensor written before it is read takes a block as it is: no zeroing pass.
    auto* raw = static_cast<unsigned char*>(api->alloc_workspace_uninit(api->rt, kBytes));
    EXPECT_TRUE(static_cast<void*>(raw) == first || static_cast<void*>(raw) == second);
    EXPECT_EQ(raw[0], 0x5a);
  });
  EXPECT_EQ(cache.stats().hits, hits + 2);
  cache.set_limit(saved_limit);
}

TEST(RuntimeTest, NumWorkersFromEnvironment) {
  const char* old = std::getenv("PYPTO_NUM_THREADS");
  std::string saved = old != nullptr ? old : "";
  setenv("PYPTO_NUM_THREADS", "3", 1);
  EXPECT_EQ(Runtime(0).num_workers(), 3);
  // Malformed or out-of-range values are errors naming the variable, not silent defaults.
  for (const char* bad : {"0", "1abc", "257", "-2", ""}) {
    setenv("PYPTO_NUM_THREADS", bad, 1);
    if (*bad == '\0') {
      EXPECT_GE(Runtime(0).num_workers(), 1);  // empty: unset
      continue;
    }
    try {
      Runtime rt(0);
      ADD_FAILURE() << "PYPTO_NUM_THREADS=" << bad << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("PYPTO_NUM_THREADS must be an integer from 1 to 256"), std::string::npos);
    }
  }
  EXPECT_THROW(Runtime(257), ConfigError);
  if (old != nullptr) {
    setenv("PYPTO_NUM_THREADS", saved.c_str(), 1);
  } else {
    unsetenv("PYPTO_NUM_THREADS");
  }
  EXPECT_GE(default_runtime().num_workers(), 1);
  EXPECT_EQ(&default_runtime(), &default_runtime());
}

TEST(RuntimeTest, ManySmallRunsDoNotHang) {
  // Short graphs stress the hand-off between orchestration, workers and the final drain.
  Runtime rt(4);
  for (int iter = 0; iter < 300; ++iter) {
    uint64_t value = 1;
    RunStats stats;
    RunChain(rt, iter % 7, &value, &stats);
    ASSERT_EQ(stats.tasks, iter % 7);
  }
}

// Which threads ran the tasks of one run of `tasks` independent tasks, each writing its own
// `elems` floats (and sleeping `sleep_ms`), started when the workers are asleep.
std::set<std::thread::id> ThreadsOfRun(Runtime& rt, int tasks, int64_t elems, int sleep_ms) {
  std::this_thread::sleep_for(milliseconds(50));  // far past the workers' spin: they sleep
  std::vector<float> data(static_cast<size_t>(tasks * elems));
  std::mutex mu;
  std::set<std::thread::id> threads;
  rt.run([&](const pypto_runtime_api*) {
    for (int i = 0; i < tasks; ++i) {
      Submit(
          rt, "t",
          [&, sleep_ms](const pypto_region*, int32_t) {
            if (sleep_ms > 0) std::this_thread::sleep_for(milliseconds(sleep_ms));
            std::lock_guard<std::mutex> lock(mu);
            threads.insert(std::this_thread::get_id());
          },
          {}, {Region1D(data.data(), i * elems, elems)});
    }
  });
  return threads;
}

TEST(RuntimeTest, SmallRunsStayOnTheCallingThreadLargeOnesWakeWorkers) {
  Runtime rt(2);
  // Eight tasks of 64 bytes each: less work than waking a worker costs.
  const std::set<std::thread::id> small = ThreadsOfRun(rt, 8, 16, 0);
  EXPECT_EQ(small, std::set<std::thread::id>{std::this_thread::get_id()});
  // Eight tasks of 1 MiB each, 5 ms apiece: the sleeping worker is woken and takes some.
  const std::set<std::thread::id> large = ThreadsOfRun(rt, 8, 1 << 18, 5);
  EXPECT_EQ(large.size(), 2u);
}

// A random read-modify-write program over three buffers, checked against
// running the same tasks one after the other in submission order.
struct RandomTask {
  int in_buf, in_off, in_len;
  int out_buf, out_off, out_len;
  uint32_t salt;
  int delay_us;
};

void ApplyTask(const RandomTask& t, std::vector<std::vector<uint32_t>>& bufs) {
  uint32_t acc = t.salt;
  for (int i = 0; i < t.in_len; ++i) acc = acc * 2654435761u + bufs[t.in_buf][t.in_off + i];
  for (int i = 0; i < t.out_len; ++i) {
    uint32_t& o = bufs[t.out_buf][t.out_off + i];
    o = (o ^ acc) * 2246822519u + static_cast<uint32_t>(i);
  }
}

TEST(RuntimeTest, RandomGraphsMatchSequentialExecution) {
  constexpr int kBuffers = 3;
  constexpr int kElems = 64;
  constexpr int kTasks = 200;
  for (uint32_t seed : {1u, 2u, 3u, 4u, 5u}) {
    std::mt19937 rng(seed);
    auto range = [&](int* off, int* len) {
      *off = static_cast<int>(rng() % kElems);
      *len = 1 + static_cast<int>(rng() % std::min(16, kElems - *off));
    };
    std::vector<RandomTask> program(kTasks);
    for (auto& t : program) {
      t.in_buf = static_cast<int>(rng() % kBuffers);
      range(&t.in_off, &t.in_len);
      t.out_buf = static_cast<int>(rng() % kBuffers);
      range(&t.out_off, &t.out_len);
      t.salt = rng();
      // Uneven task durations provoke reordering wherever a dependency is missing.
      t.delay_us = (rng() % 4 == 0) ? static_cast<int>(rng() % 300) : 0;
    }
    std::vector<std::vector<uint32_t>> initial(kBuffers, std::vector<uint32_t>(kElems));
    for (auto& b : initial) {
      for (auto& v : b) v = rng();
    }
    auto expected = initial;
    for (const auto& t : program) ApplyTask(t, expected);

    for (int workers : {1, 2, 4, 8}) {
      Runtime rt(workers);
      auto bufs = initial;
      RunStats stats = rt.run([&](const pypto_runtime_api*) {
        for (int i = 0; i < kTasks; ++i) {
          const RandomTask& t = program[i];
          Submit(
              rt, "rand" + std::to_string(i), [&t, &bufs](const pypto_region*, int32_t) {
                if (t.delay_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(t.delay_us));
                ApplyTask(t, bufs);
              },
              {Region1D(bufs[t.in_buf].data(), t.in_off, t.in_len)},
              {Region1D(bufs[t.out_buf].data(), t.out_off, t.out_len)});
        }
      });
      EXPECT_EQ(stats.tasks, kTasks);
      EXPECT_EQ(bufs, expected) << "seed=" << seed << " workers=" << workers;
    }
  }
}

}  // namespace
// Recording and building run no task: a workspace is a placeholder address of its own (none is
// allocated, so a size no machine has still counts), distinct from the others and from user memory.
TEST(RuntimeTest, RecordingAndBuildingAllocateNoWorkspace) {
  Runtime rt(1);
  const int64_t huge = int64_t{1} << 44;  // 16 TiB
  std::vector<uintptr_t> seen;
  RunStats st = rt.build([&](const pypto_runtime_api* api) {
    for (int64_t bytes : {huge, int64_t{3}, huge}) {
      void* p = api->alloc_workspace(api->rt, bytes);
      ASSERT_NE(p, nullptr);
      seen.push_back(reinterpret_cast<uintptr_t>(p));
    }
    EXPECT_EQ(api->failed(api->rt), 0);
  });
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_GE(seen[0], uintptr_t{1} << 48);
  EXPECT_GE(seen[1], seen[0] + static_cast<uintptr_t>(huge));
  EXPECT_GE(seen[2], seen[1] + 64);
  EXPECT_EQ(seen[0] % 64, 0u);
  rt.record([&](const pypto_runtime_api* api) { EXPECT_NE(api->alloc_workspace(api->rt, huge), nullptr); });
  // A size past the placeholder space is the same error a run gives.
  EXPECT_THROW(rt.build([&](const pypto_runtime_api*) { rt.alloc_workspace(int64_t{1} << 62); }), OutOfMemory);
  // Running allocates for real: 16 TiB cannot be had.
  EXPECT_THROW(rt.run([&](const pypto_runtime_api*) { rt.alloc_workspace(huge); }), OutOfMemory);
}

}  // namespace pypto::runtime
