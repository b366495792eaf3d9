// Recording mode, Chrome traces and the task window of the runtime.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <unistd.h>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/runtime.h"
#include "test_regions.h"

namespace pypto::runtime {
namespace {

// 1-D ranges of int64 buffers.
pypto_region Box1D(void* base, int64_t offset, int64_t extent) { return testing::Region1D(base, offset, extent, 8); }

void Add(Runtime& rt, const std::string& name, TaskFn fn, const std::vector<pypto_region>& in,
         const std::vector<pypto_region>& out, int64_t bytes = 0) {
  rt.submit_regions(name, std::move(fn), in, out, bytes);
}

int CountOf(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1)) ++n;
  return n;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string TempPath(const std::string& name) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/pypto_" + name + "_" + std::to_string(::getpid()) + ".json";
}

TEST(TaskGraphTest, RecordingComputesEdgesWithoutRunningTasks) {
  Runtime rt(2);
  int64_t buf[16];
  std::atomic<int> ran{0};
  auto body = [&](const pypto_region*, int32_t) { ++ran; };
  TaskGraphRecord g = rt.record([&](const pypto_runtime_api*) {
    Add(rt, "w", body, {}, {Box1D(buf, 0, 16)}, 1024);
    Add(rt, "r0", body, {Box1D(buf, 0, 8)}, {});
    Add(rt, "r1", body, {Box1D(buf, 8, 8)}, {});
    Add(rt, "w2", body, {}, {Box1D(buf, 0, 16)});
  });
  EXPECT_EQ(ran.load(), 0);
  ASSERT_EQ(g.tasks.size(), 4u);
  EXPECT_EQ(g.tasks[0].name, "w");
  EXPECT_EQ(g.tasks[0].buffer_bytes, 1024);
  EXPECT_TRUE(g.tasks[0].preds.empty());
  EXPECT_EQ(g.tasks[1].preds, std::vector<int64_t>{0});
  EXPECT_EQ(g.tasks[2].preds, std::vector<int64_t>{0});
  EXPECT_EQ(g.tasks[3].preds, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(g.edges, 5);

  // The same runtime then runs normally.
  RunStats stats = rt.run([&](const pypto_runtime_api*) { Add(rt, "w", body, {}, {Box1D(buf, 0, 16)}); });
  EXPECT_EQ(stats.tasks, 1);
  EXPECT_EQ(ran.load(), 1);
}

TEST(TaskGraphTest, RecordingLongChainsKeepsEveryEdge) {
  // More tasks than the window: recording never schedules, so nothing blocks.
  Runtime rt(2);
  rt.set_task_window(4);
  int64_t value = 0;
  TaskGraphRecord g = rt.record([&](const pypto_runtime_api*) {
    for (int i = 0; i < 1000; ++i) Add(rt, "step", [](const pypto_region*, int32_t) {}, {Box1D(&value, 0, 1)}, {Box1D(&value, 0, 1)});
  });
  ASSERT_EQ(g.tasks.size(), 1000u);
  EXPECT_EQ(g.edges, 999);
  for (int i = 1; i < 1000; ++i) ASSERT_EQ(g.tasks[i].preds, std::vector<int64_t>{i - 1});
}

TEST(TaskGraphTest, RecordingRethrowsOrchestrationErrors) {
  Runtime rt(2);
  int64_t buf[4];
  EXPECT_THROW(rt.record([&](const pypto_runtime_api*) {
    pypto_region r = Box1D(buf, 0, 4);
    r.elem_size = 0;
    Add(rt, "bad", [](const pypto_region*, int32_t) {}, {r}, {});
  }), std::invalid_argument);
  TaskGraphRecord g = rt.record([&](const pypto_runtime_api*) {
    Add(rt, "ok", [](const pypto_region*, int32_t) {}, {}, {Box1D(buf, 0, 4)});
  });
  EXPECT_EQ(g.tasks.size(), 1u);
}

TEST(TaskGraphTest, WindowIsConfigurableAndValidated) {
  Runtime rt(4);
  EXPECT_GT(rt.task_window(), 0);
  EXPECT_THROW(rt.set_task_window(0), std::invalid_argument);
  EXPECT_THROW(rt.set_task_window(-1), std::invalid_argument);
  uint64_t expected = 1;
  for (uint64_t i = 0; i < 500; ++i) expected = expected * 31 + i;
  for (int64_t window : {1, 2, 3, 4, 16384}) {
    rt.set_task_window(window);
    EXPECT_EQ(rt.task_window(), window);
    uint64_t value = 1;
    std::vector<int64_t> slots(300, 0);
    rt.run([&](const pypto_runtime_api*) {
      for (int64_t i = 0; i < 500; ++i) {
        Add(rt, "chain", [&value, i](const pypto_region*, int32_t) { value = value * 31 + static_cast<uint64_t>(i); },
            {Box1D(&value, 0, 1)}, {Box1D(&value, 0, 1)});
        if (i < 300) Add(rt, "slot", [&slots, i](const pypto_region*, int32_t) { slots[i] = i; }, {}, {Box1D(slots.data(), i, 1)});
      }
    });
    EXPECT_EQ(value, expected) << "window=" << window;
    for (int64_t i = 0; i < 300; ++i) ASSERT_EQ(slots[i], i);
  }
}

TEST(TaskGraphTest, TraceHasOneCompleteEventPerTask) {
  Runtime rt(3);
  int64_t buf[64];
  const std::string path = TempPath("trace");
  std::remove(path.c_str());
  rt.run(
      [&](const pypto_runtime_api*) {
        for (int i = 0; i < 64; ++i) Add(rt, i % 2 ? "odd\"kernel" : "even", [](const pypto_region*, int32_t) {}, {}, {Box1D(buf, i, 1)});
      },
      path);
  std::string text = ReadFile(path);
  std::remove(path.c_str());
  EXPECT_EQ(text.rfind("{\"traceEvents\": [", 0), 0u) << text.substr(0, 80);
  EXPECT_NE(text.find("\"displayTimeUnit\": \"ns\""), std::string::npos);
  EXPECT_EQ(CountOf(text, "\"cat\": \"task\""), 64);
  EXPECT_EQ(CountOf(text, "\"name\": \"odd\\\"kernel\""), 32);
  // Three threads run tasks: the orchestrating thread (tid 0) and two workers.
  EXPECT_EQ(CountOf(text, "\"name\": \"thread_name\""), 3);
  EXPECT_EQ(CountOf(text, "\"idle_us\""), 2);
  EXPECT_EQ(CountOf(text, "\"name\": \"orchestration\""), 1);

  // Without a path (and without PYPTO_TRACE) nothing is written.
  unsetenv("PYPTO_TRACE");
  rt.run([&](const pypto_runtime_api*) { Add(rt, "even", [](const pypto_region*, int32_t) {}, {}, {Box1D(buf, 0, 1)}); });
  EXPECT_FALSE(std::ifstream(path).good());

  // PYPTO_TRACE is read at each run.
  setenv("PYPTO_TRACE", path.c_str(), 1);
  rt.run([&](const pypto_runtime_api*) { Add(rt, "even", [](const pypto_region*, int32_t) {}, {}, {Box1D(buf, 0, 1)}); });
  unsetenv("PYPTO_TRACE");
  text = ReadFile(path);
  std::remove(path.c_str());
  EXPECT_EQ(CountOf(text, "\"cat\": \"task\""), 1);
}

int32_t EmptyKernel(const pypto_region*, int32_t, const int64_t*, int32_t) { return 0; }

TEST(TaskGraphTest, RecordSizesAreReportedAndBounded) {
  // The numbers quoted in docs/runtime.md: a row-block task with three 2-D regions, two scalars and
  // one predecessor link fits in 256 bytes.
  const size_t expected = Runtime::task_record_bytes() + 3 * Runtime::region_record_bytes(2) + 2 * 8 +
                          Runtime::link_bytes();
  std::cout << "task header=" << Runtime::task_record_bytes() << " 2-D region=" << Runtime::region_record_bytes(2)
            << " link=" << Runtime::link_bytes() << " typical task=" << expected << "\n";
  EXPECT_LE(expected, 256u);

  Runtime rt(2);
  rt.set_task_window(64);
  std::vector<float> x(1024 * 64), y(1024 * 64), w(64 * 64);
  auto box = [](float* base, int64_t r0, int64_t rows) { return testing::Region2D(base, r0, 0, rows, 64, 64); };
  const auto* api = rt.api();
  RunStats stats = rt.run([&](const pypto_runtime_api*) {
    const pypto_tensor tx = tensor_of(box(x.data(), 0, 1024)), tw = tensor_of(box(w.data(), 0, 64)),
                       ty = tensor_of(box(y.data(), 0, 1024));
    const int32_t hx = api->tensor_handle(api->rt, &tx), hw = api->tensor_handle(api->rt, &tw),
                  hy = api->tensor_handle(api->rt, &ty);
    for (int64_t i = 0; i < 1024 / 32; ++i) {
      for (int64_t step = 0; step < 8; ++step) {
        const int64_t row[] = {32 * i, 0}, zero[] = {0, 0}, block[] = {32, 64}, all[] = {64, 64};
        const pypto_task_arg args[] = {
            {hx, PYPTO_ACCESS_IN, row, block}, {hw, PYPTO_ACCESS_IN, zero, all}, {hy, PYPTO_ACCESS_OUT, row, block}};
        const int64_t scalars[] = {i, step};
        const pypto_task_desc d = {"step", &EmptyKernel, 0, args, scalars, 3, 2};
        api->task_submit_desc(api->rt, &d);
      }
    }
  });
  EXPECT_EQ(stats.tasks, 256);
  // Each task after the first of its row block depends on its predecessor (write after write).
  EXPECT_EQ(stats.edges, 256 - 32);
  EXPECT_LE(stats.task_bytes, stats.tasks * static_cast<int64_t>(expected));
  EXPECT_GE(stats.task_bytes, stats.tasks * static_cast<int64_t>(expected - Runtime::link_bytes()));
  EXPECT_GE(stats.peak_live_tasks, 1);
  EXPECT_LE(stats.peak_live_tasks, 64);
}

}  // namespace
}  // namespace pypto::runtime
