/// The task-graph runtime: executes the tasks that generated orchestration code
/// submits through the C ABI in `pypto_abi.h`.
///
/// Orchestration runs on the thread that calls `Runtime::run` and submits tasks
/// while a persistent worker pool already executes earlier ones (streaming).
/// Dependencies are derived from the regions each task reads and writes, so the
/// orchestration code never names edges explicitly. docs/runtime.md describes
/// the design: compact task records in a ring arena, a per-buffer region index
/// and lock-free successor lists.
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
#include <optional>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "runtime/pypto_abi.h"

namespace pypto::runtime {

class RegionIndex;
struct RegionAccess;

/// Counters describing one task graph (executed by `run`, or built by `record`/`build`).
struct RunStats {
  /// Number of tasks handed to the scheduler (tasks submitted after a failure are dropped, not counted).
  int64_t tasks = 0;
  /// Number of dependency edges (deduplicated per predecessor/successor pair). An edge to a task that
  /// had already finished and been dropped from the region index is not found, so in large executed
  /// graphs this count can depend on timing; recorded graphs are exact.
  int64_t edges = 0;
  /// Bytes of task records allocated over the run (header, regions, scalars and successor links);
  /// `task_bytes / tasks` is the average record size. Zero in recording mode, which keeps no records.
  int64_t task_bytes = 0;
  /// Highest number of tasks that were submitted and not yet reclaimed at one time.
  int64_t peak_live_tasks = 0;
  /// Wall time of the orchestration (submitting every task), and of the whole run, in nanoseconds.
  int64_t build_ns = 0;
  int64_t total_ns = 0;
  /// Why the trace of this run could not be written ("" when it was, or when none was asked for).
  /// The run itself succeeded: its outputs are complete.
  std::string trace_error;
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

/// Default bound on the number of live tasks (see `Runtime::task_window`).
constexpr int64_t kDefaultTaskWindow = int64_t{1} << 14;
/// Highest number of regions one task may have.
constexpr int kMaxTaskRegions = 64;

/// The first failure of a run, formatted as "task <id> (<name>) failed: <reason>".
class TaskError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A PYPTO_* environment variable (or a limit set through the API) holds a malformed or
/// out-of-range value; the message names the variable, the value and what is accepted.
class ConfigError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// A run-time buffer (a workspace) the machine cannot provide; the message says which and how
/// large. Python's MemoryError.
class OutOfMemory : public std::bad_alloc {
 public:
  explicit OutOfMemory(std::string msg) : msg_(std::move(msg)) {}
  const char* what() const noexcept override { return msg_.c_str(); }

 private:
  std::string msg_;
};

/// Threads a runtime may use at most (PYPTO_NUM_THREADS, Runtime(n)).
constexpr int kMaxThreads = 256;
/// Largest task window (PYPTO_TASK_WINDOW, set_task_window): the task arena reserves a few hundred
/// bytes per task of the window.
constexpr int64_t kMaxTaskWindow = int64_t{1} << 22;

/// The value of integer environment variable `name`, parsed strictly (decimal digits, optional
/// sign, nothing else); nullopt when unset or empty. Throws ConfigError for a malformed value or
/// one outside [lo, hi].
std::optional<int64_t> env_int(const char* name, int64_t lo, int64_t hi);

/// A trace file (PYPTO_TRACE or an explicit trace path) could not be written.
class TraceError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A task body in C++ form (tests and the Python task helpers); it receives the task's regions in
/// argument order and may throw. A task's scalars are passed only to C kernels.
using TaskFn = std::function<void(const pypto_region* args, int32_t nargs)>;

/// The tensor a region is a box of, as orchestration registers it with tensor_handle: the region's
/// base, buffer and strides (its shape reaches just past the box; tensor_handle does not use it).
pypto_tensor tensor_of(const pypto_region& r);

/// Returns true when regions `a` and `b` may touch the same memory (always false for different buffers).
bool regions_overlap(const pypto_region& a, const pypto_region& b);

/// Returns true when region `outer` provably contains every element of `inner` (same base assumed).
bool region_covers(const pypto_region& outer, const pypto_region& inner);

/// Returns true when some extent of `r` is zero or negative (the region names no element).
bool region_is_empty(const pypto_region& r);

/// A persistent worker pool plus the dependency tracker for one task graph at a time.
class Runtime {
 public:
  /// Runs tasks on `num_threads` threads: the thread calling `run` plus `num_threads - 1` workers.
  /// 0 picks PYPTO_NUM_THREADS or the hardware concurrency.
  explicit Runtime(int num_threads = 0);
  /// Stops and joins the workers; no run may be in progress.
  ~Runtime();

  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  /// Number of threads that execute tasks, the calling thread included.
  int num_workers() const { return static_cast<int>(workers_.size()) + 1; }

  /// Runs `orchestrate` on the calling thread, waits for every submitted task and rethrows the first failure.
  /// When the environment variable PYPTO_TRACE names a file, a Chrome trace of the run is written there.
  RunStats run(const std::function<void(const pypto_runtime_api*)>& orchestrate);
  /// As `run`, writing a Chrome trace-event JSON file to `trace_path` unless it is empty (PYPTO_TRACE is ignored).
  RunStats run(const std::function<void(const pypto_runtime_api*)>& orchestrate, const std::string& trace_path);
  /// Runs `orchestrate` in recording mode: tasks are allocated and their dependencies computed as in
  /// `run`, but no task is scheduled and no kernel runs. Returns the complete task graph; rethrows
  /// the first failure of the orchestration (such as an invalid region).
  TaskGraphRecord record(const std::function<void(const pypto_runtime_api*)>& orchestrate);
  /// As `record`, but keeps only the counts: measures how fast the graph is built.
  RunStats build(const std::function<void(const pypto_runtime_api*)>& orchestrate);

  /// Bound on live tasks: a task is live from its submission until it and every task submitted
  /// before it have finished. When reached, the submitting thread runs ready tasks until half the
  /// window is free. Initialised from PYPTO_TASK_WINDOW (default kDefaultTaskWindow).
  int64_t task_window() const { return window_.load(std::memory_order_relaxed); }
  /// Sets the window for later runs; throws std::invalid_argument unless `n` > 0.
  void set_task_window(int64_t n);

  /// sizeof of the fixed part of a task record (regions, scalars and links follow it).
  static size_t task_record_bytes();
  /// Bytes of one 2-D region stored in a task record.
  static size_t region_record_bytes(int ndim);
  /// sizeof of one successor link stored in a task record (one per unfinished predecessor).
  static size_t link_bytes();

  /// The handle of tensor `t`'s layout for `submit_desc` (see pypto_runtime_api::tensor_handle).
  int32_t tensor_handle(const pypto_tensor& t);
  /// Resolves the dependencies of the task `d` describes and hands it to the scheduler (the one way
  /// tasks are submitted: generated code calls it through pypto_runtime_api::task_submit_desc);
  /// returns false once the run has failed. A kernel returning non-zero fails the task.
  bool submit_desc(const pypto_task_desc& d);
  /// The same with a C++ body run instead of `d.fn` (which may then be null); an exception fails
  /// the task. `d.name` must live until the run ends.
  bool submit_desc(const pypto_task_desc& d, TaskFn fn);
  /// submit_desc for C++ callers holding regions: registers each region's layout and submits a
  /// task named `name` (copied) that reads `inputs` and writes `outputs`, in that argument order.
  bool submit_regions(std::string name, TaskFn fn, const std::vector<pypto_region>& inputs,
                      const std::vector<pypto_region>& outputs, int64_t buffer_bytes = 0);
  /// Returns zeroed (unless `zeroed` is false: contents unspecified), 64-byte aligned memory that stays
  /// valid until the run's tasks have finished. When recording or building (no task runs) it returns
  /// a placeholder address of its own instead, which nothing may dereference.
  void* alloc_workspace(int64_t bytes, bool zeroed = true);
  /// True once a task (or the orchestration) of the current run has failed.
  bool failed() const { return failed_.load(std::memory_order_acquire); }

  /// Counters of the last finished `run` or `build` (also of one that failed).
  RunStats last_stats() const {
    std::lock_guard<std::mutex> lock(stats_mu_);
    return last_stats_;
  }

  /// The C function table bound to this runtime, for generated orchestration code.
  const pypto_runtime_api* api() const { return &api_; }

 private:
  friend struct CApi;
  struct Task;
  struct Link;
  struct Scheduler;
  // A task ready to be enqueued, however it was described; `fn` is owned by the caller.
  struct TaskSpec {
    int64_t id;
    const char* name;
    pypto_kernel_fn kernel;
    TaskFn* fn;
    int64_t buffer_bytes;
    const pypto_task_arg* task_args;
    size_t nargs;
    const int64_t* scalars;
    size_t nscalars;
  };

  enum class Mode { kRun, kRecord, kBuild };

  // One executed task of a traced run; times in ns since the run started.
  struct TraceEvent {
    int64_t id;
    const char* name;
    int64_t start_ns;
    int64_t end_ns;
    bool cancelled;
  };

  void worker_loop(int tid);
  // Runs (or cancels) one task on thread `tid` (0 = orchestrating thread, workers 1..n) and releases
  // its successors.
  /// Runs `task` and releases its successors; returns one it made ready, for the caller to run next.
  Task* execute(Task* task, int tid);
  // Runs the task's body; returns false when it was cancelled because the run had failed.
  bool run_body(Task& task);
  int64_t now_ns() const;
  void write_trace(const std::string& path, int64_t orch_end_ns, int64_t run_end_ns);
  // Frees the records of finished tasks at the tail of the ring.
  void reclaim();
  // True when a record of `bytes` fits in the arena space not held by unreclaimed tasks.
  bool arena_fits(uint64_t bytes) const;
  // Lets the calling thread run ready tasks until at most `live` tasks are live and `bytes` of the
  // arena are free (all tasks finished when `live` is 0).
  void help_until(int64_t live, int64_t bytes);
  void record_failure(std::exception_ptr error);
  void record_task_failure(const Task& task, const std::string& reason);
  // Tracks and schedules (or records) the task; returns -1, or the index of an argument whose box
  // the region index rejected (nothing was recorded then).
  int enqueue(TaskSpec& spec);
  // Both forms of submit_desc: `body`, when set, runs instead of `d.fn`; the task's record takes it
  // over when the task is kept (it is left null then).
  bool submit(const pypto_task_desc& d, std::unique_ptr<TaskFn>& body);
  // Throws the message for the malformed descriptor `d` (whose task has a C++ body when `has_body`):
  // its header (`arg` < 0) or argument `arg`.
  [[noreturn]] void reject_desc(const pypto_task_desc& d, bool has_body, const char* name, int arg);
  // True when the task with submission number `seq` has finished (only meaningful in Mode::kRun).
  bool finished(int64_t seq) const;
  void begin_run(Mode mode);
  // Runs the orchestration on this thread; an exception becomes the run's failure.
  void call_orchestration(const std::function<void(const pypto_runtime_api*)>& orchestrate);
  // Drops what the run kept (the region index, workspaces, task names), then rethrows its first failure.
  void end_run();
  std::exception_ptr take_error();

  pypto_runtime_api api_;
  std::vector<std::thread> workers_;

  // Serialises whole runs: per-run state below belongs to one run at a time.
  std::mutex run_mu_;
  std::unique_ptr<Scheduler> sched_;

  std::atomic<bool> failed_{false};
  std::mutex error_mu_;
  std::exception_ptr first_error_;

  // Producer-only state, touched solely by the orchestrating thread.
  Mode mode_ = Mode::kRun;
  int64_t next_task_id_ = 0;
  int64_t next_seq_ = 0;
  int64_t tail_seq_ = 0;
  int64_t run_bytes_ = 0;  // bytes of the regions this run's tasks have submitted (kRun)
  uint64_t arena_head_ = 0;
  uint64_t arena_tail_ = 0;
  RunStats stats_;
  mutable std::mutex stats_mu_;
  RunStats last_stats_;
  std::unique_ptr<RegionIndex> index_;
  std::vector<int64_t> preds_;
  std::deque<std::string> fn_names_;
  uint64_t placeholder_next_ = 0;  // next workspace address of a record or build (0: none given yet)
  std::vector<int64_t> record_ids_;
  TaskGraphRecord record_;

  std::atomic<int64_t> window_{kDefaultTaskWindow};
  // Tracing: set before the orchestration starts (published to workers through the scheduler);
  // each thread appends only to its own slot, read after the run drained.
  bool tracing_ = false;
  std::chrono::steady_clock::time_point run_start_;
  std::vector<std::vector<TraceEvent>> trace_;

  std::mutex workspace_mu_;
  // This run's workspaces, with the byte size a BlockCache block was acquired for (0: a block of
  // aligned_alloc's, freed after the run).
  std::vector<std::pair<void*, size_t>> workspaces_;
  void release_workspaces();
};

/// The process-wide runtime, created on first use with `Runtime(0)`.
Runtime& default_runtime();

}  // namespace pypto::runtime

#endif  // PYPTO_RUNTIME_RUNTIME_H_
