#include "runtime/runtime.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "runtime/region_index.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <new>
#include <sstream>
#include <utility>

namespace pypto::runtime {

namespace {

constexpr size_t kWorkspaceAlign = 64;
// Arena bytes reserved per task of the window; a record larger than a quarter of the arena is refused.
constexpr uint64_t kArenaBytesPerTask = 384;
constexpr uint64_t kMinArenaBytes = uint64_t{1} << 20;
// How long an idle thread spins for new work before it sleeps.
constexpr auto kSpin = std::chrono::microseconds(50);

int resolve_num_threads(int requested) {
  if (requested > kMaxThreads)
    throw ConfigError("a runtime takes at most " + std::to_string(kMaxThreads) + " threads, asked for " +
                      std::to_string(requested));
  if (requested > 0) return requested;
  if (auto v = env_int("PYPTO_NUM_THREADS", 1, kMaxThreads)) return static_cast<int>(*v);
  unsigned hc = std::thread::hardware_concurrency();
  return hc > 0 ? static_cast<int>(std::min<unsigned>(hc, kMaxThreads)) : 1;
}

// The window bounds the number of live tasks so that a long-running orchestration does not queue
// an unbounded graph ahead of the workers.
int64_t resolve_task_window() {
  if (auto v = env_int("PYPTO_TASK_WINDOW", 1, kMaxTaskWindow)) return *v;
  return kDefaultTaskWindow;
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
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
  if (r.base == nullptr && !region_is_empty(r)) throw std::invalid_argument("region has a null base");
}

// A test-and-test-and-set lock for the ready queue's short critical sections.
class SpinLock {
 public:
  void lock() {
    while (flag_.exchange(true, std::memory_order_acquire)) {
      while (flag_.load(std::memory_order_relaxed)) cpu_relax();
    }
  }
  void unlock() { flag_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> flag_{false};
};

}  // namespace

// ----------------------------------------------------------------------------------------------
// Task records.
//
// A submitted task is one contiguous record in the run's ring arena: this header, then its
// scalars, its regions (a descriptor pointer plus offsets and extents per dim) and one successor
// link per predecessor. Records are freed in submission order once finished.

// An entry of a predecessor's successor list; it lives in the successor's record, which cannot be
// freed before every predecessor has finished.
struct Runtime::Link {
  Task* succ;
  Link* next;

  // The list head of a finished task.
  static Link* closed() { return reinterpret_cast<Link*>(uintptr_t{1}); }
};

struct Runtime::Task {
  int64_t id;
  const char* name;
  pypto_kernel_fn kernel;
  TaskFn* fn;
  // Successor links; Link::closed() once the task has finished, so late submitters do not link to it.
  std::atomic<Link*> succ;
  // Logical arena offset just past this record.
  uint64_t end;
  // Unfinished predecessors (plus one while the task is being linked).
  std::atomic<int32_t> pending;
  std::atomic<uint8_t> done;
  uint8_t nargs;
  uint16_t nscalars;

  int64_t* scalars() { return reinterpret_cast<int64_t*>(this + 1); }
  char* regions() { return reinterpret_cast<char*>(scalars() + nscalars); }
};

// A task between task_alloc and submit.
struct Runtime::Staged {
  int64_t id = 0;
  const char* name = nullptr;
  pypto_kernel_fn kernel = nullptr;
  TaskFn* fn = nullptr;
  int64_t buffer_bytes = 0;
  std::vector<RegionAccess> args;
  // The boxes of `args`: offsets then extents, PYPTO_MAX_DIMS each (the accesses point here once
  // the task is submitted).
  std::vector<std::array<int64_t, 2 * PYPTO_MAX_DIMS>> boxes;
  std::vector<int64_t> scalars;
};

size_t Runtime::task_record_bytes() { return sizeof(Task); }

size_t Runtime::region_record_bytes(int ndim) { return sizeof(const RegionDesc*) + 2 * sizeof(int64_t) * ndim; }

size_t Runtime::link_bytes() { return sizeof(Link); }

// ----------------------------------------------------------------------------------------------
// The scheduler: a ring arena of task records, the slot table that maps submission numbers to
// records, and a FIFO ready queue. Idle threads spin briefly, then sleep on a condition variable.

struct Runtime::Scheduler {
  // Ready queue (capacity = slots, since ready tasks are live tasks).
  SpinLock lock;
  std::vector<Task*> ring;
  uint64_t head = 0;
  uint64_t tail = 0;
  std::atomic<int64_t> size{0};

  std::mutex sleep_mu;
  std::condition_variable work_cv;
  std::condition_variable main_cv;
  std::atomic<int> sleepers{0};
  std::atomic<bool> main_waiting{false};
  std::atomic<bool> shutdown{false};

  // Records of live tasks, indexed by submission number modulo the slot count.
  std::vector<Task*> slots;
  uint64_t mask = 0;
  char* arena = nullptr;
  uint64_t arena_size = 0;

  ~Scheduler() { std::free(arena); }

  void resize(int64_t window) {
    uint64_t n = 1;
    while (n < static_cast<uint64_t>(window)) n <<= 1;
    const uint64_t bytes = std::max(kMinArenaBytes, (static_cast<uint64_t>(window) * kArenaBytesPerTask + 63) / 64 * 64);
    if (n == slots.size() && bytes == arena_size) return;
    slots.assign(n, nullptr);
    ring.assign(n, nullptr);
    mask = n - 1;
    head = tail = 0;
    std::free(arena);
    arena = static_cast<char*>(std::aligned_alloc(64, bytes));
    if (arena == nullptr) throw std::bad_alloc();
    arena_size = bytes;
  }

  void push(Task* t) {
    lock.lock();
    ring[tail & mask] = t;
    ++tail;
    size.fetch_add(1, std::memory_order_seq_cst);
    lock.unlock();
    if (sleepers.load(std::memory_order_seq_cst) > 0) {
      std::lock_guard<std::mutex> g(sleep_mu);
      work_cv.notify_one();
    }
    wake_main();
  }

  Task* pop() {
    if (size.load(std::memory_order_relaxed) <= 0) return nullptr;
    lock.lock();
    Task* t = nullptr;
    if (head != tail) {
      t = ring[head & mask];
      ++head;
      size.fetch_sub(1, std::memory_order_relaxed);
    }
    lock.unlock();
    return t;
  }

  void wake_main() {
    if (main_waiting.load(std::memory_order_seq_cst)) {
      std::lock_guard<std::mutex> g(sleep_mu);
      main_cv.notify_one();
    }
  }
};

// ----------------------------------------------------------------------------------------------
// The C function table's entries. Exceptions must not cross the C boundary into generated code,
// so they become the run's failure and orchestration sees `failed()`.

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

  static int32_t tensor_handle(void* rt, const pypto_tensor* t) {
    return guarded(rt, [&] {
      if (t == nullptr) throw std::invalid_argument("tensor_handle: null tensor");
      return self(rt)->tensor_handle(*t);
    }, int32_t{-1});
  }

  // Called once per task: submit_desc and enqueue are inlined into it, so a submission crosses one
  // call into the region index instead of three.
  [[gnu::flatten]] static int32_t task_submit_desc(void* rt, const pypto_task_desc* d) {
    return guarded(rt, [&] {
      if (d == nullptr) throw std::invalid_argument("task_submit_desc: null task");
      return self(rt)->submit_desc(*d) ? 0 : 1;
    }, 1);
  }
};

Runtime::Runtime(int num_threads)
    : sched_(std::make_unique<Scheduler>()), index_(std::make_unique<RegionIndex>()) {
  api_.abi_version = PYPTO_ABI_VERSION;
  api_.rt = this;
  api_.task_alloc = &CApi::task_alloc;
  api_.task_add_input = &CApi::task_add_input;
  api_.task_add_output = &CApi::task_add_output;
  api_.task_add_scalar = &CApi::task_add_scalar;
  api_.task_submit = &CApi::task_submit;
  api_.alloc_workspace = &CApi::alloc_workspace;
  api_.failed = &CApi::failed;
  api_.tensor_handle = &CApi::tensor_handle;
  api_.task_submit_desc = &CApi::task_submit_desc;

  window_.store(resolve_task_window(), std::memory_order_relaxed);
  const int n = resolve_num_threads(num_threads);
  trace_.resize(static_cast<size_t>(n));
  workers_.reserve(static_cast<size_t>(n - 1));
  for (int i = 1; i < n; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

Runtime::~Runtime() {
  {
    std::lock_guard<std::mutex> lock(sched_->sleep_mu);
    sched_->shutdown.store(true, std::memory_order_seq_cst);
  }
  sched_->work_cv.notify_all();
  for (auto& w : workers_) w.join();
}

std::optional<int64_t> env_int(const char* name, int64_t lo, int64_t hi) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return std::nullopt;
  const char* p = v + (*v == '+' || *v == '-');
  bool digits = *p != '\0';
  for (const char* q = p; *q; ++q) digits = digits && *q >= '0' && *q <= '9';
  errno = 0;
  char* end = nullptr;
  const long long x = digits ? std::strtoll(v, &end, 10) : 0;
  if (!digits || errno == ERANGE || x < lo || x > hi)
    throw ConfigError(std::string(name) + " must be an integer from " + std::to_string(lo) + " to " +
                      std::to_string(hi) + ", found '" + v + "'");
  return x;
}

void Runtime::set_task_window(int64_t n) {
  if (n <= 0 || n > kMaxTaskWindow)
    throw ConfigError("the task window must be from 1 to " + std::to_string(kMaxTaskWindow) + " tasks, found " +
                      std::to_string(n));
  window_.store(n, std::memory_order_relaxed);
}

int64_t Runtime::now_ns() const {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - run_start_).count();
}

void Runtime::worker_loop(int tid) {
  Scheduler& s = *sched_;
  for (;;) {
    if (Task* t = s.pop()) {
      execute(t, tid);
      continue;
    }
    const auto until = std::chrono::steady_clock::now() + kSpin;
    for (int i = 1; s.size.load(std::memory_order_relaxed) <= 0; ++i) {
      if (s.shutdown.load(std::memory_order_relaxed)) return;
      cpu_relax();
      if ((i & 63) == 0) {
        if (std::chrono::steady_clock::now() > until) break;
        std::this_thread::yield();
      }
    }
    if (s.size.load(std::memory_order_relaxed) > 0) continue;
    std::unique_lock<std::mutex> lock(s.sleep_mu);
    s.sleepers.fetch_add(1, std::memory_order_seq_cst);
    s.work_cv.wait(lock, [&] {
      return s.shutdown.load(std::memory_order_seq_cst) || s.size.load(std::memory_order_seq_cst) > 0;
    });
    s.sleepers.fetch_sub(1, std::memory_order_seq_cst);
    if (s.shutdown.load(std::memory_order_relaxed)) return;
  }
}

bool Runtime::run_body(Task& task) {
  // After a failure, tasks that have not started are cancelled but still
  // "complete" so that their successors drain and run() can return.
  if (failed()) return false;
  pypto_region regs[kMaxTaskRegions];
  const char* p = task.regions();
  for (int i = 0; i < task.nargs; ++i) {
    const RegionDesc* d = *reinterpret_cast<const RegionDesc* const*>(p);
    const auto* box = reinterpret_cast<const int64_t*>(p + sizeof(const RegionDesc*));
    pypto_region& r = regs[i];
    r.base = d->base;
    r.buffer = d->buffer;
    r.ndim = d->ndim;
    r.elem_size = d->elem_size;
    for (int k = 0; k < PYPTO_MAX_DIMS; ++k) {
      const bool used = k < d->ndim;
      r.offset[k] = used ? box[k] : 0;
      r.extent[k] = used ? box[d->ndim + k] : 1;
      r.stride[k] = used ? d->stride[k] : 0;
    }
    p += region_record_bytes(d->ndim);
  }
  try {
    if (task.kernel != nullptr) {
      int32_t status = task.kernel(regs, task.nargs, task.scalars(), task.nscalars);
      if (status != 0) record_task_failure(task, "kernel returned status " + std::to_string(status));
    } else {
      (*task.fn)(regs, task.nargs);
    }
  } catch (const std::exception& e) {
    record_task_failure(task, e.what());
  } catch (...) {
    record_task_failure(task, "unknown exception");
  }
  return true;
}

void Runtime::execute(Task* task, int tid) {
  // The only cost of tracing when it is off is this branch.
  if (__builtin_expect(tracing_, 0)) {
    const int64_t start = now_ns();
    const bool ran = run_body(*task);
    trace_[static_cast<size_t>(tid)].push_back(TraceEvent{task->id, task->name, start, now_ns(), !ran});
  } else {
    run_body(*task);
  }
  delete task->fn;
  task->fn = nullptr;
  Link* l = task->succ.exchange(Link::closed(), std::memory_order_acq_rel);
  while (l != nullptr) {
    // Read the link before releasing its task: once ready, the successor may run and be freed.
    Link* next = l->next;
    Task* s = l->succ;
    if (s->pending.fetch_sub(1, std::memory_order_acq_rel) == 1) sched_->push(s);
    l = next;
  }
  // The record may be reclaimed by the orchestrating thread as soon as `done` is set.
  task->done.store(1, std::memory_order_seq_cst);
  sched_->wake_main();
}

bool Runtime::finished(int64_t seq) const {
  return seq < tail_seq_ || sched_->slots[static_cast<uint64_t>(seq) & sched_->mask]->done.load(std::memory_order_acquire);
}

void Runtime::reclaim() {
  Scheduler& s = *sched_;
  while (tail_seq_ < next_seq_) {
    Task* t = s.slots[static_cast<uint64_t>(tail_seq_) & s.mask];
    if (!t->done.load(std::memory_order_acquire)) break;
    arena_tail_ = t->end;
    ++tail_seq_;
  }
  if (tail_seq_ == next_seq_) arena_head_ = arena_tail_ = 0;
}

bool Runtime::arena_fits(uint64_t bytes) const {
  const uint64_t size = sched_->arena_size;
  const uint64_t pos = arena_head_ % size;
  const uint64_t start = pos + bytes > size ? arena_head_ + size - pos : arena_head_;
  return start + bytes - arena_tail_ <= size;
}

void Runtime::help_until(int64_t live, int64_t bytes) {
  Scheduler& s = *sched_;
  auto satisfied = [&] {
    reclaim();
    if (next_seq_ - tail_seq_ > live) return false;
    return bytes == 0 || arena_fits(static_cast<uint64_t>(bytes));
  };
  while (!satisfied()) {
    if (Task* t = s.pop()) {
      execute(t, 0);
      continue;
    }
    // Nothing is ready: the oldest live task runs on a worker. Spin briefly, then sleep until a
    // task finishes or becomes ready.
    Task* oldest = s.slots[static_cast<uint64_t>(tail_seq_) & s.mask];
    auto progress = [&] {
      return s.size.load(std::memory_order_seq_cst) > 0 || oldest->done.load(std::memory_order_seq_cst) != 0;
    };
    const auto until = std::chrono::steady_clock::now() + kSpin;
    bool moved = false;
    for (int i = 1; !(moved = progress()); ++i) {
      cpu_relax();
      if ((i & 63) == 0 && std::chrono::steady_clock::now() > until) break;
    }
    if (moved) continue;
    std::unique_lock<std::mutex> lock(s.sleep_mu);
    s.main_waiting.store(true, std::memory_order_seq_cst);
    s.main_cv.wait(lock, progress);
    s.main_waiting.store(false, std::memory_order_seq_cst);
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

std::exception_ptr Runtime::take_error() {
  std::lock_guard<std::mutex> lock(error_mu_);
  return std::exchange(first_error_, nullptr);
}

void Runtime::begin_run(Mode mode) {
  failed_.store(false, std::memory_order_release);
  first_error_ = nullptr;
  mode_ = mode;
  next_task_id_ = 0;
  next_seq_ = 0;
  tail_seq_ = 0;
  arena_head_ = arena_tail_ = 0;
  stats_ = RunStats();
  // The index keeps what the last run left (its memory is reused) until this reset.
  index_->reset();
  if (mode == Mode::kRun) index_->set_finished([this](int64_t seq) { return finished(seq); });
  record_ = TaskGraphRecord();
  record_ids_.clear();
  if (mode == Mode::kRun) sched_->resize(window_.load(std::memory_order_relaxed));
}

void Runtime::end_run() {
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    last_stats_ = stats_;
  }
  // Tasks allocated but never submitted are dropped without running.
  for (auto& st : building_) recycle(std::move(st));
  building_.clear();
  fn_names_.clear();
  std::vector<int64_t>().swap(record_ids_);
  std::lock_guard<std::mutex> lock(workspace_mu_);
  for (void* p : workspaces_) std::free(p);
  workspaces_.clear();
  if (std::exception_ptr error = take_error()) std::rethrow_exception(error);
}

void Runtime::call_orchestration(const std::function<void(const pypto_runtime_api*)>& orchestrate) {
  run_start_ = std::chrono::steady_clock::now();
  try {
    orchestrate(&api_);
  } catch (...) {
    record_failure(std::current_exception());
  }
}

RunStats Runtime::run(const std::function<void(const pypto_runtime_api*)>& orchestrate) {
  const char* env = std::getenv("PYPTO_TRACE");
  return run(orchestrate, env != nullptr ? std::string(env) : std::string());
}

RunStats Runtime::run(const std::function<void(const pypto_runtime_api*)>& orchestrate,
                      const std::string& trace_path) {
  std::lock_guard<std::mutex> run_lock(run_mu_);
  begin_run(Mode::kRun);
  // Workers read tracing_ only after popping a task of this run, which the queue's lock orders.
  tracing_ = !trace_path.empty();
  if (tracing_) {
    for (auto& events : trace_) events.clear();
  }
  call_orchestration(orchestrate);
  const int64_t orch_end = now_ns();
  help_until(0, 0);
  stats_.build_ns = orch_end;
  stats_.total_ns = now_ns();
  if (tracing_) {
    const int64_t run_end = now_ns();
    tracing_ = false;
    // The run succeeded whatever happens to its trace: a trace that cannot be written is reported
    // beside the results, not instead of them.
    try {
      write_trace(trace_path, orch_end, run_end);
    } catch (const std::exception& e) {
      stats_.trace_error = e.what();
    }
  }
  RunStats stats = stats_;
  end_run();
  return stats;
}

TaskGraphRecord Runtime::record(const std::function<void(const pypto_runtime_api*)>& orchestrate) {
  std::lock_guard<std::mutex> run_lock(run_mu_);
  begin_run(Mode::kRecord);
  call_orchestration(orchestrate);
  TaskGraphRecord out = std::move(record_);
  record_ = TaskGraphRecord();
  out.edges = stats_.edges;
  end_run();
  return out;
}

RunStats Runtime::build(const std::function<void(const pypto_runtime_api*)>& orchestrate) {
  std::lock_guard<std::mutex> run_lock(run_mu_);
  begin_run(Mode::kBuild);
  call_orchestration(orchestrate);
  stats_.build_ns = stats_.total_ns = now_ns();
  RunStats stats = stats_;
  end_run();
  return stats;
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

  // Only a regular file (or a new one): opening a FIFO with no reader would block forever.
  struct stat st;
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode))
    throw TraceError("PYPTO_TRACE: '" + path + "' is not a regular file; the trace was not written");
  errno = 0;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f)
    throw TraceError("PYPTO_TRACE: cannot open '" + path + "' for writing" +
                     (errno ? std::string(": ") + std::strerror(errno) : std::string()));
  f << os.str();
  f.close();
  if (!f) throw TraceError("PYPTO_TRACE: failed to write '" + path + "'");
  for (auto& events : trace_) std::vector<TraceEvent>().swap(events);
}

int64_t Runtime::task_alloc(const char* name, pypto_kernel_fn fn, int64_t buffer_bytes) {
  if (fn == nullptr) throw std::invalid_argument("task_alloc: null kernel function");
  Staged& st = new_staged(name != nullptr ? name : "<unnamed>", buffer_bytes);
  st.kernel = fn;
  return st.id;
}

int64_t Runtime::task_alloc(std::string name, TaskFn fn, int64_t buffer_bytes) {
  fn_names_.push_back(std::move(name));
  Staged& st = new_staged(fn_names_.back().c_str(), buffer_bytes);
  st.fn = new TaskFn(std::move(fn));
  return st.id;
}

Runtime::Staged& Runtime::new_staged(const char* name, int64_t buffer_bytes) {
  // On CPU, a generated kernel keeps its tiles in a thread-local arena of its own (sized by codegen),
  // so the runtime allocates nothing for them; the size is only sanity-checked.
  if (buffer_bytes < 0) {
    throw std::invalid_argument("task_alloc: negative buffer_bytes " + std::to_string(buffer_bytes));
  }
  std::unique_ptr<Staged> st;
  if (!staged_pool_.empty()) {
    st = std::move(staged_pool_.back());
    staged_pool_.pop_back();
  } else {
    st = std::make_unique<Staged>();
  }
  st->id = next_task_id_++;
  st->name = name;
  st->kernel = nullptr;
  st->fn = nullptr;
  st->buffer_bytes = buffer_bytes;
  st->args.clear();
  st->boxes.clear();
  st->scalars.clear();
  building_.push_back(std::move(st));
  return *building_.back();
}

void Runtime::recycle(std::unique_ptr<Staged> st) {
  delete st->fn;
  st->fn = nullptr;
  staged_pool_.push_back(std::move(st));
}

std::vector<std::unique_ptr<Runtime::Staged>>::iterator Runtime::find_staged(int64_t id, const char* what) {
  // The task being built is almost always the newest one.
  for (auto it = building_.end(); it != building_.begin();) {
    --it;
    if ((*it)->id == id) return it;
  }
  throw std::invalid_argument(std::string(what) + ": task " + std::to_string(id) +
                              " was not allocated in this run or is already submitted");
}

Runtime::Staged* Runtime::staged_task(int64_t id, const char* what) { return find_staged(id, what)->get(); }

void Runtime::add_region(int64_t task, const pypto_region& r, bool write) {
  Staged* st = staged_task(task, write ? "add_output" : "add_input");
  validate_region(r);
  if (st->args.size() >= static_cast<size_t>(kMaxTaskRegions)) {
    throw std::invalid_argument("task " + std::to_string(task) + " (" + st->name + ") has more than " +
                                std::to_string(kMaxTaskRegions) + " regions");
  }
  RegionAccess& a = st->args.emplace_back();
  a.desc = index_->intern(r);
  a.write = write;
  auto& box = st->boxes.emplace_back();
  std::copy(r.offset, r.offset + r.ndim, box.begin());
  std::copy(r.extent, r.extent + r.ndim, box.begin() + PYPTO_MAX_DIMS);
}

void Runtime::add_input(int64_t task, const pypto_region& r) { add_region(task, r, false); }

void Runtime::add_output(int64_t task, const pypto_region& r) { add_region(task, r, true); }

void Runtime::add_scalar(int64_t task, int64_t value) {
  Staged* st = staged_task(task, "add_scalar");
  if (st->scalars.size() >= 0xffff) {
    throw std::invalid_argument("task " + std::to_string(task) + " (" + st->name + ") has too many scalars");
  }
  st->scalars.push_back(value);
}

void Runtime::submit(int64_t id) {
  auto it = find_staged(id, "submit");
  std::unique_ptr<Staged> st = std::move(*it);
  building_.erase(it);
  try {
    // Once the run has failed nothing new would run anyway; skipping tracking keeps the drain short.
    if (!failed()) {
      for (size_t i = 0; i < st->args.size(); ++i) {
        st->args[i].offset = st->boxes[i].data();
        st->args[i].extent = st->boxes[i].data() + PYPTO_MAX_DIMS;
      }
      // The record takes the body over; whatever enqueue leaves in spec.fn stays the staged task's.
      TaskSpec spec{st->id, st->name, st->kernel, std::exchange(st->fn, nullptr), st->buffer_bytes, st->args.data(),
                    nullptr, st->args.size(), st->scalars.data(), st->scalars.size()};
      try {
        // Regions added piecewise were validated then, so the index finds no bad box.
        if (enqueue(spec) >= 0) throw std::logic_error("submit: the region index rejected a validated region");
      } catch (...) {
        st->fn = spec.fn;
        throw;
      }
      st->fn = spec.fn;
    }
  } catch (...) {
    recycle(std::move(st));
    throw;
  }
  recycle(std::move(st));
}

int32_t Runtime::tensor_handle(const pypto_tensor& t) {
  pypto_region r{};
  r.base = t.data;
  r.buffer = t.buffer;
  r.ndim = t.ndim;
  r.elem_size = t.elem_size;
  for (int d = 0; d < PYPTO_MAX_DIMS && d < t.ndim; ++d) {
    r.extent[d] = t.shape[d];
    r.stride[d] = t.stride[d];
  }
  validate_region(r);
  return index_->handle(r);
}

bool Runtime::submit_desc(const pypto_task_desc& d) {
  if (failed()) return false;
  const char* name = d.name != nullptr ? d.name : "<unnamed>";
  if (d.fn == nullptr || d.buffer_bytes < 0 || static_cast<uint32_t>(d.nargs) > kMaxTaskRegions ||
      (d.nargs > 0 && d.args == nullptr) || static_cast<uint32_t>(d.nscalars) > 0xffff ||
      (d.nscalars > 0 && d.scalars == nullptr)) {
    reject_desc(d, name, -1);
  }
  // Handles, modes and boxes are checked by the region index as it resolves the arguments.
  TaskSpec spec{next_task_id_, name, d.fn, nullptr, d.buffer_bytes, nullptr, d.args, static_cast<size_t>(d.nargs),
                d.scalars, static_cast<size_t>(d.nscalars)};
  const int bad = enqueue(spec);
  if (bad >= 0) reject_desc(d, name, bad);
  ++next_task_id_;
  return !failed();
}

void Runtime::reject_desc(const pypto_task_desc& d, const char* name, int arg) {
  auto bad = [&](const std::string& what) {
    return std::invalid_argument("task_submit_desc: task " + std::to_string(next_task_id_) + " (" + name + ") " + what);
  };
  if (arg < 0) {
    if (d.fn == nullptr) throw bad("has a null kernel function");
    if (d.buffer_bytes < 0) throw bad("has negative buffer_bytes " + std::to_string(d.buffer_bytes));
    if (d.nargs < 0 || d.nargs > kMaxTaskRegions || (d.nargs > 0 && d.args == nullptr)) {
      throw bad("has " + std::to_string(d.nargs) + " arguments, expected 0 to " + std::to_string(kMaxTaskRegions));
    }
    throw bad("has " + std::to_string(d.nscalars) + " scalars, expected 0 to 65535");
  }
  const pypto_task_arg& a = d.args[arg];
  const std::string which = "argument " + std::to_string(arg);
  const RegionDesc* desc = index_->by_handle(a.tensor);
  if (desc == nullptr) {
    throw bad(which + " has tensor handle " + std::to_string(a.tensor) + ", expected 0 to " +
              std::to_string(static_cast<int64_t>(index_->num_handles()) - 1));
  }
  if (a.mode != PYPTO_ACCESS_IN && a.mode != PYPTO_ACCESS_OUT) {
    throw bad(which + " has access mode " + std::to_string(a.mode) +
              ", expected PYPTO_ACCESS_IN (1) or PYPTO_ACCESS_OUT (2)");
  }
  for (int k = 0; k < desc->ndim; ++k) {
    if (a.extent[k] < 0) {
      throw bad(which + " has negative extent " + std::to_string(a.extent[k]) + " in dim " + std::to_string(k));
    }
  }
  throw bad(which + " has a null base");
}

int Runtime::enqueue(TaskSpec& st) {
  Scheduler& s = *sched_;
  const int64_t seq = next_seq_;

  if (mode_ == Mode::kRun) {
    const int64_t window = window_.load(std::memory_order_relaxed);
    if (seq - tail_seq_ >= static_cast<int64_t>(s.slots.size()) || seq - tail_seq_ >= window) {
      reclaim();
      if (next_seq_ - tail_seq_ >= window) help_until(window / 2, 0);
    }
  }

  std::vector<int64_t>& preds = preds_;
  const int bad = st.task_args != nullptr ? index_->add_task(st.task_args, st.nargs, seq, preds)
                                          : index_->add_task(st.args, st.nargs, seq, preds);
  if (bad >= 0) return bad;
  stats_.edges += static_cast<int64_t>(preds.size());
  ++stats_.tasks;

  if (mode_ != Mode::kRun) {
    ++next_seq_;
    if (mode_ == Mode::kRecord) {
      record_ids_.push_back(st.id);
      RecordedTask rec;
      rec.id = st.id;
      rec.name = st.name;
      rec.buffer_bytes = st.buffer_bytes;
      rec.preds.reserve(preds.size());
      for (int64_t p : preds) rec.preds.push_back(record_ids_[static_cast<size_t>(p)]);
      std::sort(rec.preds.begin(), rec.preds.end());
      record_.tasks.push_back(std::move(rec));
    }
  } else {
    // The record: header, scalars, regions, one link per predecessor.
    size_t bytes = sizeof(Task) + st.nscalars * sizeof(int64_t) + preds.size() * sizeof(Link);
    // Every argument resolved in add_task, so its layout is known here (looked up once, for the
    // record's size and its copy below).
    const RegionDesc* descs[kMaxTaskRegions];
    for (size_t i = 0; i < st.nargs; ++i) {
      descs[i] = st.task_args != nullptr ? index_->by_handle(st.task_args[i].tensor) : st.args[i].desc;
      bytes += region_record_bytes(descs[i]->ndim);
    }
    bytes = (bytes + 7) & ~size_t{7};
    if (bytes > s.arena_size / 4) {
      throw std::invalid_argument("task " + std::to_string(st.id) + " (" + st.name + ") needs a " +
                                  std::to_string(bytes) + "-byte record, more than the arena allows");
    }
    // Reclaiming on every submission keeps the live records few, so they stay in cache.
    help_until(INT64_MAX, static_cast<int64_t>(bytes));
    uint64_t start = arena_head_;
    const uint64_t pos = start % s.arena_size;
    if (pos + bytes > s.arena_size) start += s.arena_size - pos;
    arena_head_ = start + bytes;
    stats_.task_bytes += static_cast<int64_t>(bytes);
    ++next_seq_;
    stats_.peak_live_tasks = std::max(stats_.peak_live_tasks, next_seq_ - tail_seq_);

    char* mem = s.arena + start % s.arena_size;
    Task* t = new (mem) Task;
    t->id = st.id;
    t->name = st.name;
    t->kernel = st.kernel;
    t->fn = std::exchange(st.fn, nullptr);
    t->succ.store(nullptr, std::memory_order_relaxed);
    t->end = arena_head_;
    t->done.store(0, std::memory_order_relaxed);
    t->nargs = static_cast<uint8_t>(st.nargs);
    t->nscalars = static_cast<uint16_t>(st.nscalars);
    std::copy(st.scalars, st.scalars + st.nscalars, t->scalars());
    char* p = t->regions();
    for (size_t i = 0; i < st.nargs; ++i) {
      const int64_t* offset = st.task_args != nullptr ? st.task_args[i].offset : st.args[i].offset;
      const int64_t* extent = st.task_args != nullptr ? st.task_args[i].extent : st.args[i].extent;
      const int nd = descs[i]->ndim;
      *reinterpret_cast<const RegionDesc**>(p) = descs[i];
      auto* box = reinterpret_cast<int64_t*>(p + sizeof(const RegionDesc*));
      copy_dims(offset, nd, box);
      copy_dims(extent, nd, box + nd);
      p += region_record_bytes(nd);
    }
    s.slots[static_cast<uint64_t>(seq) & s.mask] = t;

    // Link into the unfinished predecessors' successor lists. The guard count keeps the task from
    // becoming ready while links are still being added.
    auto* links = reinterpret_cast<Link*>(p);
    const auto n = static_cast<int32_t>(preds.size());
    t->pending.store(n + 1, std::memory_order_relaxed);
    int32_t skipped = 0;
    for (int32_t i = 0; i < n; ++i) {
      const int64_t pseq = preds[static_cast<size_t>(i)];
      // A reclaimed record is gone; a live one that has finished is seen by its closed list below.
      if (pseq < tail_seq_) {
        ++skipped;
        continue;
      }
      Task* pred = s.slots[static_cast<uint64_t>(pseq) & s.mask];
      Link* link = &links[i];
      link->succ = t;
      Link* head = pred->succ.load(std::memory_order_acquire);
      for (;;) {
        if (head == Link::closed()) {
          ++skipped;
          break;
        }
        link->next = head;
        if (pred->succ.compare_exchange_weak(head, link, std::memory_order_acq_rel, std::memory_order_acquire)) break;
      }
    }
    if (t->pending.fetch_sub(skipped + 1, std::memory_order_acq_rel) == skipped + 1) s.push(t);
  }

  index_->prune();
  return -1;
}

void* Runtime::alloc_workspace(int64_t bytes) {
  // A negative size is a workspace whose element count overflowed 64 bits (pto::make_workspace).
  if (bytes < 0) throw OutOfMemory("pypto: a workspace of more than 2^63 bytes cannot be allocated");
  // aligned_alloc needs a size that is a non-zero multiple of the alignment.
  size_t size = (static_cast<size_t>(bytes) + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
  if (size == 0) size = kWorkspaceAlign;
  void* p = std::aligned_alloc(kWorkspaceAlign, size);
  if (p == nullptr) {
    char gib[32];
    std::snprintf(gib, sizeof gib, "%.1f", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
    throw OutOfMemory("pypto: a workspace of " + std::to_string(bytes) + " bytes (" + gib +
                      " GiB) could not be allocated");
  }
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
