/// The task-graph runtime: executes the tasks that generated orchestration code
/// submits through the C ABI in `pypto_abi.h`.
///
/// Orchestration runs on the thread that calls `Runtime::run` and submits tasks
/// while a persistent worker pool already executes earlier ones (streaming).
/// Dependencies are derived from the regions each task reads and writes, so the
/// orchestration code never names edges explicitly.
#ifndef PYPTO_RUNTIME_RUNTIME_H_
#define PYPTO_RUNTIME_RUNTIME_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "runtime/pypto_abi.h"

namespace pypto::runtime {

/// Counters describing one executed task graph.
struct RunStats {
  /// Number of tasks handed to the scheduler (tasks submitted after a failure are dropped, not counted).
  int64_t tasks = 0;
  /// Number of dependency edges (deduplicated per predecessor/successor pair).
  int64_t edges = 0;
};

/// One task of a recorded task graph (see `Runtime::record`).
struct RecordedTask {
  int64_t id = 0;
  std::string name;
  int64_t buffer_bytes = 0;
  /// Ids of the tasks it depends on, ascending and deduplicated.
  std::vector<int64_t> preds;
};

/// The task graph an orchestration builds, without running any kernel.
struct TaskGraphRecord {
  /// Submitted tasks in submission order.
  std::vector<RecordedTask> tasks;
  /// Number of dependency edges (sum of the tasks' `preds` sizes).
  int64_t edges = 0;
};

/// Default bound on the number of submitted but unfinished tasks.
constexpr int64_t kDefaultTaskWindow = int64_t{1} << 14;

/// The first failure of a run, formatted as "task <id> (<name>) failed: <reason>".
class TaskError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A trace file (PYPTO_TRACE or an explicit trace path) could not be written.
class TraceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A task body in C++ form; it receives the task's regions in the order they were added and may throw.
/// Scalars added with `add_scalar` are passed only to C kernels.
using TaskFn = std::function<void(const pypto_region* args, int32_t nargs)>;

/// Returns true when regions `a` and `b` (which must share a base) may touch the same memory.
bool regions_overlap(const pypto_region& a, const pypto_region& b);

/// Returns true when region `outer` provably contains every element of `inner` (same base assumed).
bool region_covers(const pypto_region& outer, const pypto_region& inner);

/// A persistent worker pool plus the dependency tracker for one task graph at a time.
class Runtime {
 public:
  /// Starts `num_workers` threads; 0 picks PYPTO_NUM_THREADS or the hardware concurrency.
  explicit Runtime(int num_workers = 0);
  /// Stops and joins the workers; no run may be in progress.
  ~Runtime();

  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  /// Number of worker threads (the thread calling `run` helps in addition).
  int num_workers() const { return static_cast<int>(workers_.size()); }

  /// Runs `orchestrate` on the calling thread, waits for every submitted task and rethrows the first failure.
  /// When the environment variable PYPTO_TRACE names a file, a Chrome trace of the run is written there.
  RunStats run(const std::function<void(const pypto_runtime_api*)>& orchestrate);
  /// As `run`, writing a Chrome trace-event JSON file to `trace_path` unless it is empty (PYPTO_TRACE is ignored).
  RunStats run(const std::function<void(const pypto_runtime_api*)>& orchestrate, const std::string& trace_path);
  /// Runs `orchestrate` in recording mode: tasks are allocated and their dependencies computed as in
  /// `run`, but no task is scheduled and no kernel runs. Returns the complete task graph; rethrows
  /// the first failure of the orchestration (such as an invalid region).
  TaskGraphRecord record(const std::function<void(const pypto_runtime_api*)>& orchestrate);

  /// Bound on submitted but unfinished tasks; when reached, the submitting thread runs tasks until
  /// half the window is free. Initialised from PYPTO_TASK_WINDOW (default kDefaultTaskWindow).
  int64_t task_window() const { return window_.load(std::memory_order_relaxed); }
  /// Sets the window for later submissions; throws std::invalid_argument unless `n` > 0.
  void set_task_window(int64_t n);

  /// sizeof of one task record (excluding its heap-held name, regions and scalars).
  static size_t task_record_bytes();
  /// sizeof of one entry of the per-buffer access lists (one per region of a live task).
  static size_t access_entry_bytes();

  /// Creates a task running a C kernel; a non-zero return value fails the task.
  int64_t task_alloc(const char* name, pypto_kernel_fn fn, int64_t buffer_bytes);
  /// Creates a task running a C++ callable; an exception fails the task.
  int64_t task_alloc(std::string name, TaskFn fn, int64_t buffer_bytes);
  /// Appends a region the task reads.
  void add_input(int64_t task, const pypto_region& r);
  /// Appends a region the task writes.
  void add_output(int64_t task, const pypto_region& r);
  /// Appends a scalar argument, passed to the C kernel in the order added.
  void add_scalar(int64_t task, int64_t value);
  /// Resolves the task's dependencies and hands it to the scheduler.
  void submit(int64_t task);
  /// Returns zeroed, 64-byte aligned memory that stays valid until the run's tasks have finished.
  void* alloc_workspace(int64_t bytes);
  /// True once a task (or the orchestration) of the current run has failed.
  bool failed() const { return failed_.load(std::memory_order_acquire); }

  /// The C function table bound to this runtime, for generated orchestration code.
  const pypto_runtime_api* api() const { return &api_; }

 private:
  friend struct CApi;
  struct Task;
  using TaskPtr = std::shared_ptr<Task>;

  // One recorded access of a buffer; `task` keeps the record alive until the
  // entry is superseded or pruned.
  struct Access {
    pypto_region region;
    TaskPtr task;
    bool write;
  };

  struct BufferAccesses {
    std::vector<Access> entries;
    // Finished tasks are swept once the list outgrows this; doubling it keeps sweeps amortised.
    size_t prune_at = 64;
  };

  // One executed task of a traced run; times in ns since the run started.
  struct TraceEvent {
    int64_t id;
    std::string name;
    int64_t start_ns;
    int64_t end_ns;
    bool cancelled;
  };

  void worker_loop(int tid);
  // Runs (or cancels) one popped task on thread `tid` (0 = orchestrating thread, workers 1..n);
  // called with `lock` held on `mu_`, returns with it held.
  void execute(TaskPtr task, std::unique_lock<std::mutex>& lock, int tid);
  // Runs the task's body; returns false when it was cancelled because the run had failed.
  bool run_body(Task& task);
  int64_t now_ns() const;
  void write_trace(const std::string& path, int64_t orch_end_ns, int64_t run_end_ns);
  // Lets the calling thread run ready tasks until fewer than `wake_inflight` tasks are unfinished.
  void help_until(int64_t wake_inflight, std::unique_lock<std::mutex>& lock);
  void record_failure(std::exception_ptr error);
  void record_task_failure(const Task& task, const std::string& reason);
  Task* building_task(int64_t id, const char* what);
  void add_region(int64_t task, const pypto_region& r, bool write);
  void track_dependencies(const TaskPtr& task, std::vector<TaskPtr>& preds);
  void prune_all_buffers();
  void reset_run_state();

  pypto_runtime_api api_;
  std::vector<std::thread> workers_;

  // Serialises whole runs: per-run state below belongs to one run at a time.
  std::mutex run_mu_;

  // Guards the scheduler state: ready queue, successor lists, counters.
  std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable main_cv_;
  std::deque<TaskPtr> ready_;
  int64_t submitted_ = 0;
  int64_t completed_ = 0;
  bool main_waiting_ = false;
  int64_t main_wake_inflight_ = 0;
  bool shutdown_ = false;

  std::atomic<bool> failed_{false};
  std::mutex error_mu_;
  std::exception_ptr first_error_;

  // Producer-only state, touched solely by the orchestrating thread.
  int64_t next_task_id_ = 0;
  int64_t edges_ = 0;
  std::unordered_map<int64_t, TaskPtr> building_;
  std::unordered_map<void*, BufferAccesses> accesses_;
  size_t total_accesses_ = 0;
  size_t global_prune_at_ = 0;

  std::atomic<int64_t> window_{kDefaultTaskWindow};
  // Recording mode (producer-only): submissions are recorded, never scheduled.
  bool recording_ = false;
  TaskGraphRecord record_;
  // Tracing: set before the orchestration starts (published to workers through mu_);
  // each thread appends only to its own slot, read after the run drained.
  bool tracing_ = false;
  std::chrono::steady_clock::time_point run_start_;
  std::vector<std::vector<TraceEvent>> trace_;

  std::mutex workspace_mu_;
  std::vector<void*> workspaces_;
};

/// The process-wide runtime, created on first use with `Runtime(0)`.
Runtime& default_runtime();

}  // namespace pypto::runtime

#endif  // PYPTO_RUNTIME_RUNTIME_H_
