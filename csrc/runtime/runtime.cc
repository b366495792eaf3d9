#include "runtime/runtime.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <sstream>
#include <utility>

namespace pypto::runtime {

namespace {

constexpr size_t kMinBufferPrune = 64;
constexpr size_t kMinGlobalPrune = 4096;
constexpr size_t kWorkspaceAlign = 64;

int resolve_num_workers(int requested) {
  if (requested > 0) return requested;
  if (const char* env = std::getenv("PYPTO_NUM_THREADS")) {
    char* end = nullptr;
    long v = std::strtol(env, &end, 10);
    if (end != env && v > 0) return static_cast<int>(std::min<long>(v, 1 << 12));
  }
  unsigned hc = std::thread::hardware_concurrency();
  return hc > 0 ? static_cast<int>(hc) : 1;
}

// The window bounds the number of submitted but unfinished tasks so that a
// long-running orchestration does not queue an unbounded graph ahead of the workers.
int64_t resolve_task_window() {
  if (const char* env = std::getenv("PYPTO_TASK_WINDOW")) {
    char* end = nullptr;
    long long v = std::strtoll(env, &end, 10);
    if (end != env && *end == '\0' && v > 0) return static_cast<int64_t>(v);
  }
  return kDefaultTaskWindow;
}

void json_string(std::ostream& os, const std::string& s) {
  os << '"';
  for (char c : s) {
    switch (c) {
      case '"': os << "\\\""; break;
      case '\\': os << "\\\\"; break;
      case '\n': os << "\\n"; break;
      case '\t': os << "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(static_cast<unsigned char>(c)));
          os << buf;
        } else {
          os << c;
        }
    }
  }
  os << '"';
}

// Microseconds with nanosecond precision, as Chrome's trace format expects.
std::string us(int64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", static_cast<double>(ns) / 1000.0);
  return buf;
}

bool is_empty(const pypto_region& r) {
  for (int d = 0; d < r.ndim; ++d) {
    if (r.extent[d] <= 0) return true;
  }
  return false;
}

// Index-space reasoning is only sound when both regions address memory the same
// way; a zero stride aliases distinct indices, so it is excluded.
/// The allocation a region belongs to: its `buffer`, or `base` when unset.
void* buffer_of(const pypto_region& r) { return r.buffer ? r.buffer : r.base; }

bool same_layout(const pypto_region& a, const pypto_region& b) {
  if (a.ndim != b.ndim || a.elem_size != b.elem_size) return false;
  for (int d = 0; d < a.ndim; ++d) {
    if (a.stride[d] != b.stride[d] || a.stride[d] == 0) return false;
  }
  return true;
}

// Half-open byte range [lo, hi) spanned by a non-empty region, as addresses
// (views of one buffer have different bases).
std::pair<int64_t, int64_t> byte_range(const pypto_region& r) {
  int64_t lo = 0;
  int64_t hi = 0;
  for (int d = 0; d < r.ndim; ++d) {
    int64_t first = r.offset[d] * r.stride[d];
    int64_t last = (r.offset[d] + r.extent[d] - 1) * r.stride[d];
    lo += std::min(first, last);
    hi += std::max(first, last);
  }
  const int64_t origin = static_cast<int64_t>(reinterpret_cast<intptr_t>(r.base));
  return {origin + lo * r.elem_size, origin + (hi + 1) * r.elem_size};
}

void validate_region(const pypto_region& r) {
  if (r.ndim < 0 || r.ndim > PYPTO_MAX_DIMS) {
    throw std::invalid_argument("region ndim " + std::to_string(r.ndim) + " is outside [0, " +
                                std::to_string(PYPTO_MAX_DIMS) + "]");
  }
  if (r.elem_size <= 0) {
    throw std::invalid_argument("region elem_size must be positive, got " + std::to_string(r.elem_size));
  }
  for (int d = 0; d < r.ndim; ++d) {
    if (r.extent[d] < 0) {
      throw std::invalid_argument("region extent[" + std::to_string(d) + "] is negative");
    }
  }
  if (r.base == nullptr && !is_empty(r)) throw std::invalid_argument("region has a null base");
}

}  // namespace

struct Runtime::Task {
  int64_t id = 0;
  std::string name;
  pypto_kernel_fn kernel = nullptr;
  TaskFn fn;
  std::vector<pypto_region> args;
  std::vector<int64_t> scalars;
  int64_t buffer_bytes = 0;
  // Which args are outputs; only needed until the task is submitted.
  std::vector<bool> writes;
  // Scheduler state, guarded by Runtime::mu_.
  std::vector<TaskPtr> successors;
  int64_t pending = 0;
  // Also read without the lock by the producer to prune finished accesses early.
  std::atomic<bool> done{false};
};

bool regions_overlap(const pypto_region& a, const pypto_region& b) {
  if (buffer_of(a) != buffer_of(b) || is_empty(a) || is_empty(b)) return false;
  if (a.base == b.base && same_layout(a, b)) {
    for (int d = 0; d < a.ndim; ++d) {
      int64_t lo = std::max(a.offset[d], b.offset[d]);
      int64_t hi = std::min(a.offset[d] + a.extent[d], b.offset[d] + b.extent[d]);
      if (lo >= hi) return false;
    }
    return true;
  }
  auto ra = byte_range(a);
  auto rb = byte_range(b);
  return ra.first < rb.second && rb.first < ra.second;
}

bool region_covers(const pypto_region& outer, const pypto_region& inner) {
  if (outer.base != inner.base || buffer_of(outer) != buffer_of(inner)) return false;
  if (is_empty(inner)) return true;
  if (is_empty(outer) || !same_layout(outer, inner)) return false;
  for (int d = 0; d < outer.ndim; ++d) {
    if (inner.offset[d] < outer.offset[d]) return false;
    if (inner.offset[d] + inner.extent[d] > outer.offset[d] + outer.extent[d]) return false;
  }
  return true;
}

// The C function table's entries. Exceptions must not cross the C boundary into
// generated code, so they become the run's failure and orchestration sees `failed()`.
struct CApi {
  static Runtime* self(void* rt) { return static_cast<Runtime*>(rt); }

  template <typename F, typename R>
  static R guarded(void* rt, F&& f, R on_error) {
    try {
      return f();
    } catch (...) {
      self(rt)->record_failure(std::current_exception());
      return on_error;
    }
  }

  static int64_t task_alloc(void* rt, const char* name, pypto_kernel_fn fn, int64_t buffer_bytes) {
    return guarded(rt, [&] { return self(rt)->task_alloc(name, fn, buffer_bytes); }, int64_t{-1});
  }

  static void task_add_input(void* rt, int64_t task, const pypto_region* region) {
    guarded(rt, [&] {
      if (region == nullptr) throw std::invalid_argument("task_add_input: null region");
      self(rt)->add_input(task, *region);
      return 0;
    }, 0);
  }

  static void task_add_output(void* rt, int64_t task, const pypto_region* region) {
    guarded(rt, [&] {
      if (region == nullptr) throw std::invalid_argument("task_add_output: null region");
      self(rt)->add_output(task, *region);
      return 0;
    }, 0);
  }

  static void task_add_scalar(void* rt, int64_t task, int64_t value) {
    guarded(rt, [&] {
      self(rt)->add_scalar(task, value);
      return 0;
    }, 0);
  }

  static void task_submit(void* rt, int64_t task) {
    guarded(rt, [&] {
      self(rt)->submit(task);
      return 0;
    }, 0);
  }

  static void* alloc_workspace(void* rt, int64_t bytes) {
    return guarded(rt, [&] { return self(rt)->alloc_workspace(bytes); }, static_cast<void*>(nullptr));
  }

  static int32_t failed(void* rt) { return self(rt)->failed() ? 1 : 0; }
};

Runtime::Runtime(int num_workers) {
  api_.abi_version = PYPTO_ABI_VERSION;
  api_.rt = this;
  api_.task_alloc = &CApi::task_alloc;
  api_.task_add_input = &CApi::task_add_input;
  api_.task_add_output = &CApi::task_add_output;
  api_.task_add_scalar = &CApi::task_add_scalar;
  api_.task_submit = &CApi::task_submit;
  api_.alloc_workspace = &CApi::alloc_workspace;
  api_.failed = &CApi::failed;

  window_.store(resolve_task_window(), std::memory_order_relaxed);
  int n = resolve_num_workers(num_workers);
  trace_.resize(static_cast<size_t>(n) + 1);
  workers_.reserve(n);
  for (int i = 0; i < n; ++i) workers_.emplace_back([this, i] { worker_loop(i + 1); });
}

Runtime::~Runtime() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    shutdown_ = true;
  }
  work_cv_.notify_all();
  for (auto& w : workers_) w.join();
}

void Runtime::set_task_window(int64_t n) {
  if (n <= 0) throw std::invalid_argument("task window must be positive, got " + std::to_string(n));
  window_.store(n, std::memory_order_relaxed);
}

size_t Runtime::task_record_bytes() { return sizeof(Task); }

size_t Runtime::access_entry_bytes() { return sizeof(Access); }

int64_t Runtime::now_ns() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - run_start_).count();
}

void Runtime::worker_loop(int tid) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [this] { return shutdown_ || !ready_.empty(); });
    if (shutdown_) return;
    TaskPtr task = std::move(ready_.front());
    ready_.pop_front();
    execute(std::move(task), lock, tid);
  }
}

bool Runtime::run_body(Task& task) {
  // After a failure, tasks that have not started are cancelled but still
  // "complete" so that their successors drain and run() can return.
  if (failed()) return false;
  try {
    if (task.kernel != nullptr) {
      int32_t status = task.kernel(task.args.data(), static_cast<int32_t>(task.args.size()), task.scalars.data(),
                                   static_cast<int32_t>(task.scalars.size()));
      if (status != 0) record_task_failure(task, "kernel returned status " + std::to_string(status));
    } else {
      task.fn(task.args.data(), static_cast<int32_t>(task.args.size()));
    }
  } catch (const std::exception& e) {
    record_task_failure(task, e.what());
  } catch (...) {
    record_task_failure(task, "unknown exception");
  }
  return true;
}

void Runtime::execute(TaskPtr task, std::unique_lock<std::mutex>& lock, int tid) {
  lock.unlock();
  // The only cost of tracing when it is off is this branch.
  if (__builtin_expect(tracing_, 0)) {
    const int64_t start = now_ns();
    const bool ran = run_body(*task);
    trace_[tid].push_back(TraceEvent{task->id, task->name, start, now_ns(), !ran});
  } else {
    run_body(*task);
  }
  // Release the body and arguments outside the lock: a finished task may stay
  // referenced by the access map for a while, and its closure may be costly to destroy.
  task->fn = nullptr;
  std::vector<pypto_region>().swap(task->args);
  std::vector<int64_t>().swap(task->scalars);

  lock.lock();
  task->done.store(true, std::memory_order_release);
  bool pushed = false;
  for (TaskPtr& succ : task->successors) {
    if (--succ->pending == 0) {
      ready_.push_back(std::move(succ));
      work_cv_.notify_one();
      pushed = true;
    }
  }
  std::vector<TaskPtr>().swap(task->successors);
  ++completed_;
  if (main_waiting_ && (pushed || submitted_ - completed_ <= main_wake_inflight_)) main_cv_.notify_one();
}

void Runtime::help_until(int64_t wake_inflight, std::unique_lock<std::mutex>& lock) {
  while (submitted_ - completed_ > wake_inflight) {
    if (!ready_.empty()) {
      TaskPtr task = std::move(ready_.front());
      ready_.pop_front();
      execute(std::move(task), lock, 0);
      continue;
    }
    main_waiting_ = true;
    main_wake_inflight_ = wake_inflight;
    main_cv_.wait(lock, [&] { return !ready_.empty() || submitted_ - completed_ <= wake_inflight; });
    main_waiting_ = false;
  }
}

void Runtime::record_failure(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(error_mu_);
    if (!first_error_) first_error_ = std::move(error);
  }
  failed_.store(true, std::memory_order_release);
}

void Runtime::record_task_failure(const Task& task, const std::string& reason) {
  record_failure(std::make_exception_ptr(
      TaskError("task " + std::to_string(task.id) + " (" + task.name + ") failed: " + reason)));
}

void Runtime::reset_run_state() {
  std::lock_guard<std::mutex> lock(mu_);
  ready_.clear();
  submitted_ = 0;
  completed_ = 0;
  main_waiting_ = false;
  failed_.store(false, std::memory_order_release);
  {
    std::lock_guard<std::mutex> elock(error_mu_);
    first_error_ = nullptr;
  }
  next_task_id_ = 0;
  edges_ = 0;
  building_.clear();
  accesses_.clear();
  total_accesses_ = 0;
  global_prune_at_ = kMinGlobalPrune;
}

RunStats Runtime::run(const std::function<void(const pypto_runtime_api*)>& orchestrate) {
  const char* env = std::getenv("PYPTO_TRACE");
  return run(orchestrate, env != nullptr ? std::string(env) : std::string());
}

RunStats Runtime::run(const std::function<void(const pypto_runtime_api*)>& orchestrate,
                      const std::string& trace_path) {
  std::lock_guard<std::mutex> run_lock(run_mu_);
  reset_run_state();
  {
    // Workers read tracing_ only after taking mu_ to pop a task of this run.
    std::lock_guard<std::mutex> lock(mu_);
    tracing_ = !trace_path.empty();
    if (tracing_) {
      for (auto& events : trace_) events.clear();
    }
    run_start_ = std::chrono::steady_clock::now();
  }
  try {
    orchestrate(&api_);
  } catch (...) {
    record_failure(std::current_exception());
  }
  const int64_t orch_end = tracing_ ? now_ns() : 0;
  // Tasks allocated but never submitted are dropped without running.
  building_.clear();
  {
    std::unique_lock<std::mutex> lock(mu_);
    help_until(0, lock);
  }
  if (tracing_) {
    const int64_t run_end = now_ns();
    {
      std::lock_guard<std::mutex> lock(mu_);
      tracing_ = false;
    }
    try {
      write_trace(trace_path, orch_end, run_end);
    } catch (...) {
      record_failure(std::current_exception());
    }
  }

  RunStats stats;
  stats.edges = edges_;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stats.tasks = submitted_;
  }
  accesses_.clear();
  total_accesses_ = 0;
  {
    std::lock_guard<std::mutex> lock(workspace_mu_);
    for (void* p : workspaces_) std::free(p);
    workspaces_.clear();
  }
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(error_mu_);
    error = std::exchange(first_error_, nullptr);
  }
  if (error) std::rethrow_exception(error);
  return stats;
}

TaskGraphRecord Runtime::record(const std::function<void(const pypto_runtime_api*)>& orchestrate) {
  std::lock_guard<std::mutex> run_lock(run_mu_);
  reset_run_state();
  recording_ = true;
  record_ = TaskGraphRecord();
  try {
    orchestrate(&api_);
  } catch (...) {
    record_failure(std::current_exception());
  }
  recording_ = false;
  building_.clear();
  accesses_.clear();
  total_accesses_ = 0;
  {
    std::lock_guard<std::mutex> lock(workspace_mu_);
    for (void* p : workspaces_) std::free(p);
    workspaces_.clear();
  }
  TaskGraphRecord out = std::move(record_);
  record_ = TaskGraphRecord();
  out.edges = edges_;
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(error_mu_);
    error = std::exchange(first_error_, nullptr);
  }
  if (error) std::rethrow_exception(error);
  return out;
}

void Runtime::write_trace(const std::string& path, int64_t orch_end_ns, int64_t run_end_ns) {
  struct Row {
    const TraceEvent* ev;
    int tid;
  };
  std::vector<Row> rows;
  std::vector<int64_t> busy(trace_.size(), 0);
  for (size_t tid = 0; tid < trace_.size(); ++tid) {
    for (const TraceEvent& e : trace_[tid]) {
      rows.push_back(Row{&e, static_cast<int>(tid)});
      busy[tid] += e.end_ns - e.start_ns;
    }
  }
  std::stable_sort(rows.begin(), rows.end(),
                   [](const Row& a, const Row& b) { return a.ev->start_ns < b.ev->start_ns; });

  std::ostringstream os;
  os << "{\"traceEvents\": [\n";
  os << R"(  {"name": "process_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": "pypto runtime"}})";
  for (size_t tid = 0; tid < trace_.size(); ++tid) {
    os << ",\n  {\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 0, \"tid\": " << tid << ", \"args\": {\"name\": ";
    json_string(os, tid == 0 ? std::string("orchestrator") : "worker " + std::to_string(tid));
    // A worker is idle whenever it runs no task during the run; the orchestrating
    // thread submits instead, so only its task time is reported.
    os << ", \"busy_us\": " << us(busy[tid]);
    if (tid != 0) os << ", \"idle_us\": " << us(std::max<int64_t>(run_end_ns - busy[tid], 0));
    os << "}}";
  }
  os << ",\n  {\"name\": \"orchestration\", \"cat\": \"orchestration\", \"ph\": \"X\", \"pid\": 0, \"tid\": 0, \"ts\": 0.000"
     << ", \"dur\": " << us(orch_end_ns) << ", \"args\": {\"tasks\": " << rows.size() << "}}";
  for (const Row& r : rows) {
    os << ",\n  {\"name\": ";
    json_string(os, r.ev->name);
    os << ", \"cat\": \"task\", \"ph\": \"X\", \"pid\": 0, \"tid\": " << r.tid << ", \"ts\": " << us(r.ev->start_ns)
       << ", \"dur\": " << us(r.ev->end_ns - r.ev->start_ns) << ", \"args\": {\"task\": " << r.ev->id;
    if (r.ev->cancelled) os << ", \"cancelled\": true";
    os << "}}";
  }
  os << "\n], \"displayTimeUnit\": \"ns\", \"otherData\": {\"run_us\": " << us(run_end_ns)
     << ", \"orchestration_us\": " << us(orch_end_ns) << ", \"workers\": " << (trace_.size() - 1)
     << ", \"tasks\": " << rows.size() << "}}\n";

  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw TraceError("PYPTO_TRACE: cannot open '" + path + "' for writing");
  f << os.str();
  f.close();
  if (!f) throw TraceError("PYPTO_TRACE: failed to write '" + path + "'");
  for (auto& events : trace_) std::vector<TraceEvent>().swap(events);
}

int64_t Runtime::task_alloc(const char* name, pypto_kernel_fn fn, int64_t buffer_bytes) {
  if (fn == nullptr) throw std::invalid_argument("task_alloc: null kernel function");
  int64_t id = task_alloc(std::string(name != nullptr ? name : "<unnamed>"), TaskFn(), buffer_bytes);
  building_.at(id)->kernel = fn;
  return id;
}

int64_t Runtime::task_alloc(std::string name, TaskFn fn, int64_t buffer_bytes) {
  // On CPU, kernels keep their tiles on their own stack; the size is only sanity-checked.
  if (buffer_bytes < 0) {
    throw std::invalid_argument("task_alloc: negative buffer_bytes " + std::to_string(buffer_bytes));
  }
  auto task = std::make_shared<Task>();
  task->id = next_task_id_++;
  task->name = std::move(name);
  task->fn = std::move(fn);
  task->buffer_bytes = buffer_bytes;
  int64_t id = task->id;
  building_.emplace(id, std::move(task));
  return id;
}

Runtime::Task* Runtime::building_task(int64_t id, const char* what) {
  auto it = building_.find(id);
  if (it == building_.end()) {
    throw std::invalid_argument(std::string(what) + ": task " + std::to_string(id) +
                                " was not allocated in this run or is already submitted");
  }
  return it->second.get();
}

void Runtime::add_region(int64_t task, const pypto_region& r, bool write) {
  Task* t = building_task(task, write ? "add_output" : "add_input");
  validate_region(r);
  t->args.push_back(r);
  t->writes.push_back(write);
}

void Runtime::add_input(int64_t task, const pypto_region& r) { add_region(task, r, false); }

void Runtime::add_output(int64_t task, const pypto_region& r) { add_region(task, r, true); }

void Runtime::add_scalar(int64_t task, int64_t value) {
  building_task(task, "add_scalar")->scalars.push_back(value);
}

void Runtime::track_dependencies(const TaskPtr& task, std::vector<TaskPtr>& preds) {
  const size_t n = task->args.size();
  // All regions are checked before any is recorded, so a task never depends on itself.
  for (size_t i = 0; i < n; ++i) {
    const pypto_region& r = task->args[i];
    if (is_empty(r)) continue;
    auto it = accesses_.find(buffer_of(r));
    if (it == accesses_.end()) continue;
    const bool write = task->writes[i];
    for (const Access& e : it->second.entries) {
      // Read-after-read never orders tasks.
      if (!write && !e.write) continue;
      if (regions_overlap(e.region, r)) preds.push_back(e.task);
    }
  }
  std::sort(preds.begin(), preds.end());
  preds.erase(std::unique(preds.begin(), preds.end()), preds.end());

  for (size_t i = 0; i < n; ++i) {
    const pypto_region& r = task->args[i];
    if (is_empty(r)) continue;
    BufferAccesses& buf = accesses_[buffer_of(r)];
    auto& entries = buf.entries;
    const size_t before = entries.size();
    if (task->writes[i]) {
      // Any later access overlapping a covered entry also overlaps this write,
      // which already depends on that entry, so the ordering is kept transitively.
      entries.erase(std::remove_if(entries.begin(), entries.end(),
                                   [&](const Access& e) { return region_covers(r, e.region); }),
                    entries.end());
    }
    entries.push_back(Access{r, task, static_cast<bool>(task->writes[i])});
    if (entries.size() > buf.prune_at) {
      // A finished task can no longer be anyone's predecessor.
      entries.erase(std::remove_if(entries.begin(), entries.end(),
                                   [](const Access& e) { return e.task->done.load(std::memory_order_acquire); }),
                    entries.end());
      buf.prune_at = std::max(kMinBufferPrune, 2 * entries.size());
    }
    total_accesses_ = total_accesses_ + entries.size() - before;
  }
  std::vector<bool>().swap(task->writes);
  if (total_accesses_ > global_prune_at_) prune_all_buffers();
}

void Runtime::prune_all_buffers() {
  size_t total = 0;
  for (auto it = accesses_.begin(); it != accesses_.end();) {
    auto& entries = it->second.entries;
    entries.erase(std::remove_if(entries.begin(), entries.end(),
                                 [](const Access& e) { return e.task->done.load(std::memory_order_acquire); }),
                  entries.end());
    if (entries.empty()) {
      it = accesses_.erase(it);
    } else {
      total += entries.size();
      ++it;
    }
  }
  total_accesses_ = total;
  global_prune_at_ = std::max(kMinGlobalPrune, 2 * total);
}

void Runtime::submit(int64_t id) {
  auto it = building_.find(id);
  if (it == building_.end()) {
    throw std::invalid_argument("submit: task " + std::to_string(id) +
                                " was not allocated in this run or is already submitted");
  }
  TaskPtr task = std::move(it->second);
  building_.erase(it);
  // Once the run has failed nothing new would run anyway; skipping tracking keeps the drain short.
  if (failed()) return;

  std::vector<TaskPtr> preds;
  track_dependencies(task, preds);
  edges_ += static_cast<int64_t>(preds.size());

  if (recording_) {
    // Nothing runs: the task stays "unfinished" so that its accesses are never pruned,
    // and only what the graph needs is kept.
    RecordedTask rec;
    rec.id = task->id;
    rec.name = task->name;
    rec.buffer_bytes = task->buffer_bytes;
    rec.preds.reserve(preds.size());
    for (const TaskPtr& p : preds) rec.preds.push_back(p->id);
    std::sort(rec.preds.begin(), rec.preds.end());
    record_.tasks.push_back(std::move(rec));
    task->fn = nullptr;
    std::vector<pypto_region>().swap(task->args);
    std::vector<int64_t>().swap(task->scalars);
    return;
  }

  std::unique_lock<std::mutex> lock(mu_);
  const int64_t window = window_.load(std::memory_order_relaxed);
  if (submitted_ - completed_ >= window) help_until(window / 2, lock);
  for (const TaskPtr& p : preds) {
    if (!p->done.load(std::memory_order_relaxed)) {
      p->successors.push_back(task);
      ++task->pending;
    }
  }
  ++submitted_;
  if (task->pending == 0) {
    ready_.push_back(std::move(task));
    work_cv_.notify_one();
    if (main_waiting_) main_cv_.notify_one();
  }
}

void* Runtime::alloc_workspace(int64_t bytes) {
  if (bytes < 0) throw std::invalid_argument("alloc_workspace: negative size " + std::to_string(bytes));
  // aligned_alloc needs a size that is a non-zero multiple of the alignment.
  size_t size = (static_cast<size_t>(bytes) + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
  if (size == 0) size = kWorkspaceAlign;
  void* p = std::aligned_alloc(kWorkspaceAlign, size);
  if (p == nullptr) throw std::bad_alloc();
  std::memset(p, 0, size);
  std::lock_guard<std::mutex> lock(workspace_mu_);
  workspaces_.push_back(p);
  return p;
}

Runtime& default_runtime() {
  // Intentionally leaked: joining workers during static destruction races with
  // interpreter shutdown, and the OS reclaims the threads at exit anyway.
  static Runtime* rt = new Runtime(0);
  return *rt;
}

}  // namespace pypto::runtime
