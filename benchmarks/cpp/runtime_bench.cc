// Microbenchmarks of the task runtime's submission and scheduling.
//
// Every task runs an empty C kernel and is submitted through the C ABI table exactly as
// generated orchestration code does (tensor handles registered once, one task_submit_desc per task), so the numbers are the runtime's own per-task cost:
// dependency tracking (Build*: `Runtime::build`, nothing runs) and tracking plus
// scheduling and execution (Run*: `Runtime::run`). Each benchmark reports tasks per
// second (items_per_second) and the counter ns_per_task (wall-clock time per task).
//
//   pypto_runtime_bench [--benchmark_filter=REGEX] [--benchmark_min_time=SECONDS]
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <initializer_list>
#include <memory>

#include "runtime/pypto_abi.h"
#include "runtime/runtime.h"

namespace {

using pypto::runtime::Runtime;
using pypto::runtime::RunStats;

// Every task touches a block of kBlockRows x kCols floats.
constexpr int64_t kBlockRows = 32;
constexpr int64_t kCols = 64;

int32_t EmptyKernel(const pypto_region*, int32_t, const int64_t*, int32_t) { return 0; }

// A row-major float matrix of `rows` x kCols. The kernels are empty, so its memory is
// allocated uninitialised and never touched: the pages of even the largest sizes are
// never faulted in.
class Matrix {
 public:
  explicit Matrix(int64_t rows) : rows_(rows), data_(new float[rows * kCols]) {}

  // The matrix's runtime handle for this run, registered as generated code does before its loops.
  int32_t Handle(const pypto_runtime_api* api) const {
    pypto_tensor t{};
    t.data = data_.get();
    t.ndim = 2;
    t.elem_size = sizeof(float);
    t.shape[0] = rows_;
    t.shape[1] = kCols;
    t.stride[0] = kCols;
    t.stride[1] = 1;
    return api->tensor_handle(api->rt, &t);
  }
  int64_t rows() const { return rows_; }

 private:
  int64_t rows_;
  std::unique_ptr<float[]> data_;
};

// Rows [first, first + count) of the matrix with handle `tensor`.
struct Rows {
  int32_t tensor;
  int64_t first;
  int64_t count;
};

Rows Block(int32_t tensor, int64_t b) { return Rows{tensor, b * kBlockRows, kBlockRows}; }

// Submits one task in one call as generated orchestration code does; `block` is its scalar argument.
void Submit(const pypto_runtime_api* api, const char* name, std::initializer_list<Rows> inputs,
            std::initializer_list<Rows> outputs, int64_t block) {
  int64_t box[2 * 8][2];
  pypto_task_arg args[8];
  int32_t n = 0;
  auto add = [&](const Rows& r, int32_t mode) {
    box[2 * n][0] = r.first;
    box[2 * n][1] = 0;
    box[2 * n + 1][0] = r.count;
    box[2 * n + 1][1] = kCols;
    args[n] = pypto_task_arg{r.tensor, mode, box[2 * n], box[2 * n + 1]};
    ++n;
  };
  for (const Rows& r : inputs) add(r, PYPTO_ACCESS_IN);
  for (const Rows& r : outputs) add(r, PYPTO_ACCESS_OUT);
  const pypto_task_desc d = {name, &EmptyKernel, 0, args, &block, n, 1};
  api->task_submit_desc(api->rt, &d);
}

// Each workload is built once per benchmark from its size argument; `tasks` is the number
// of tasks one orchestration submits, and calling it runs the orchestration.

// n tasks, each writing its own row block of one matrix: no dependencies.
class Independent {
 public:
  explicit Independent(int64_t n) : n_(n), out_(n * kBlockRows) {}
  int64_t tasks() const { return n_; }
  void operator()(const pypto_runtime_api* api) const {
    const int32_t out = out_.Handle(api);
    for (int64_t b = 0; b < n_; ++b) Submit(api, "independent", {}, {Block(out, b)}, b);
  }

 private:
  int64_t n_;
  Matrix out_;
};

// n tasks, each reading and writing the same block: a dependency chain.
class Chain {
 public:
  explicit Chain(int64_t n) : n_(n), buf_(kBlockRows) {}
  int64_t tasks() const { return n_; }
  void operator()(const pypto_runtime_api* api) const {
    const Rows block = Block(buf_.Handle(api), 0);
    for (int64_t i = 0; i < n_; ++i) Submit(api, "chain", {block}, {block}, i);
  }

 private:
  int64_t n_;
  Matrix buf_;
};

// A transformer-layer-like pipeline over `blocks` row blocks, four tasks per block:
// A = f(X, W); B = g(A); Y = h(B, X); X = Y. W is one shared read-only weight.
class RowPipeline {
 public:
  explicit RowPipeline(int64_t blocks)
      : blocks_(blocks), x_(blocks * kBlockRows), a_(blocks * kBlockRows), b_(blocks * kBlockRows),
        y_(blocks * kBlockRows), w_(kCols) {}
  int64_t tasks() const { return 4 * blocks_; }
  void operator()(const pypto_runtime_api* api) const {
    const int32_t hx = x_.Handle(api), ha = a_.Handle(api), hb = b_.Handle(api), hy = y_.Handle(api);
    const Rows w{w_.Handle(api), 0, w_.rows()};
    for (int64_t rb = 0; rb < blocks_; ++rb) {
      const Rows x = Block(hx, rb), a = Block(ha, rb), b = Block(hb, rb), y = Block(hy, rb);
      Submit(api, "project", {x, w}, {a}, rb);
      Submit(api, "activate", {a}, {b}, rb);
      Submit(api, "residual", {b, x}, {y}, rb);
      Submit(api, "store", {y}, {x}, rb);
    }
  }

 private:
  int64_t blocks_;
  Matrix x_, a_, b_, y_, w_;
};

// One writer of a whole matrix, n readers of its disjoint row blocks, then one more writer
// of the whole matrix, which waits for all n readers (write-after-read fan-in).
class FanIn {
 public:
  explicit FanIn(int64_t n) : n_(n), buf_(n * kBlockRows) {}
  int64_t tasks() const { return n_ + 2; }
  void operator()(const pypto_runtime_api* api) const {
    const int32_t h = buf_.Handle(api);
    const Rows whole{h, 0, buf_.rows()};
    Submit(api, "fill", {}, {whole}, 0);
    for (int64_t b = 0; b < n_; ++b) Submit(api, "read", {Block(h, b)}, {}, b);
    Submit(api, "overwrite", {}, {whole}, 0);
  }

 private:
  int64_t n_;
  Matrix buf_;
};

// The flash-attention phase of the LLaMA layer over n x n tiles, three tasks per pair (as in
// models/llama/layer.py): for query tile i and key tile j, score S_i = f(Q_i, K_j); online-softmax
// update of (M_i, L_i, ACC_i, P_i) from S_i; ACC_i += P_i V_j.
class Attention {
 public:
  explicit Attention(int64_t n)
      : n_(n), q_(n * kBlockRows), k_(n * kBlockRows), v_(n * kBlockRows), s_(n * kBlockRows), m_(n * kBlockRows),
        l_(n * kBlockRows), acc_(n * kBlockRows), p_(n * kBlockRows) {}
  int64_t tasks() const { return 3 * n_ * n_; }
  void operator()(const pypto_runtime_api* api) const {
    const int32_t hq = q_.Handle(api), hk = k_.Handle(api), hv = v_.Handle(api), hs = s_.Handle(api);
    const int32_t hm = m_.Handle(api), hl = l_.Handle(api), hacc = acc_.Handle(api), hp = p_.Handle(api);
    for (int64_t i = 0; i < n_; ++i) {
      const Rows q = Block(hq, i), s = Block(hs, i), m = Block(hm, i), l = Block(hl, i), acc = Block(hacc, i),
                 p = Block(hp, i);
      for (int64_t j = 0; j < n_; ++j) {
        Submit(api, "score", {q, Block(hk, j)}, {s}, j);
        Submit(api, "softmax", {s}, {m, l, acc, p}, j);
        Submit(api, "output", {p, Block(hv, j)}, {acc}, j);
      }
    }
  }

 private:
  int64_t n_;
  Matrix q_, k_, v_, s_, m_, l_, acc_, p_;
};

using Clock = std::chrono::steady_clock;

// `elapsed` is the wall-clock time of all iterations' timed work.
void ReportTasks(benchmark::State& state, int64_t tasks_per_iteration, Clock::duration elapsed) {
  const int64_t tasks = state.iterations() * tasks_per_iteration;
  state.SetItemsProcessed(tasks);
  if (tasks > 0) {
    state.counters["ns_per_task"] =
        static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count()) / tasks;
  }
}

// Times `Runtime::build` (dependencies resolved, nothing runs or is kept) or `Runtime::run` (built
// and executed on state.range(1) threads, the orchestrating thread included) of the workload.
template <class Workload, bool kExecute>
void BM_Graph(benchmark::State& state) {
  const Workload workload(state.range(0));
  Runtime rt(kExecute ? static_cast<int>(state.range(1)) : 1);
  Clock::duration elapsed{};
  for (auto _ : state) {
    RunStats stats;
    const Clock::time_point start = Clock::now();
    try {
      stats = kExecute ? rt.run(std::cref(workload)) : rt.build(std::cref(workload));
    } catch (const std::exception& e) {
      state.SkipWithError(e.what());
      break;
    }
    elapsed += Clock::now() - start;
    if (stats.tasks != workload.tasks()) {
      state.SkipWithError("the runtime reported an unexpected number of tasks");
      break;
    }
  }
  ReportTasks(state, workload.tasks(), elapsed);
}

template <class Workload>
void BM_Build(benchmark::State& state) {
  BM_Graph<Workload, false>(state);
}

template <class Workload>
void BM_Run(benchmark::State& state) {
  BM_Graph<Workload, true>(state);
}

constexpr std::initializer_list<int64_t> kSizes = {int64_t{1} << 10, int64_t{1} << 14, int64_t{1} << 17};
// Tiles per side of the attention workload: 3 n^2 tasks (about 3K, 49K and 786K).
constexpr std::initializer_list<int64_t> kTiles = {32, 128, 512};

void BuildArgs(benchmark::internal::Benchmark* b, const char* size_name, std::initializer_list<int64_t> sizes) {
  for (int64_t n : sizes) b->Arg(n);
  b->ArgNames({size_name})->Unit(benchmark::kMillisecond);
}

void RunArgs(benchmark::internal::Benchmark* b, const char* size_name, std::initializer_list<int64_t> sizes) {
  for (int64_t n : sizes) {
    for (int64_t threads : {1, 2}) b->Args({n, threads});
  }
  b->ArgNames({size_name, "threads"})->Unit(benchmark::kMillisecond)->UseRealTime();
}

void TaskArgs(benchmark::internal::Benchmark* b) { BuildArgs(b, "n", kSizes); }
void TaskRunArgs(benchmark::internal::Benchmark* b) { RunArgs(b, "n", kSizes); }
void BlockArgs(benchmark::internal::Benchmark* b) { BuildArgs(b, "blocks", kSizes); }
void BlockRunArgs(benchmark::internal::Benchmark* b) { RunArgs(b, "blocks", kSizes); }
void TileArgs(benchmark::internal::Benchmark* b) { BuildArgs(b, "tiles", kTiles); }
void TileRunArgs(benchmark::internal::Benchmark* b) { RunArgs(b, "tiles", kTiles); }

BENCHMARK(BM_Build<Independent>)->Name("BM_BuildIndependent")->Apply(TaskArgs);
BENCHMARK(BM_Run<Independent>)->Name("BM_RunIndependent")->Apply(TaskRunArgs);
BENCHMARK(BM_Run<Chain>)->Name("BM_RunChain")->Apply(TaskRunArgs);
BENCHMARK(BM_Build<RowPipeline>)->Name("BM_BuildRowPipeline")->Apply(BlockArgs);
BENCHMARK(BM_Run<RowPipeline>)->Name("BM_RunRowPipeline")->Apply(BlockRunArgs);
BENCHMARK(BM_Run<FanIn>)->Name("BM_RunFanIn")->Apply(TaskRunArgs);
// A run of one task on a 2-thread runtime: the runtime's share of a cached call of a small kernel.
BENCHMARK(BM_Run<Independent>)->Name("BM_RunOneTask")->Args({1, 2})->ArgNames({"n", "threads"})->UseRealTime();
BENCHMARK(BM_Build<Attention>)->Name("BM_BuildAttention")->Apply(TileArgs);
BENCHMARK(BM_Run<Attention>)->Name("BM_RunAttention")->Apply(TileRunArgs);

}  // namespace

BENCHMARK_MAIN();
