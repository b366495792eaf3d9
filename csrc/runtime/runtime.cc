// The runtime's construction and submission side: the C function table generated code calls
// (exceptions become the run's failure), task submission through the region index into the
// scheduler's records, and workspaces. worker.cc runs the tasks; trace.cc writes PYPTO_TRACE.
#include "runtime/runtime.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "runtime/memory.h"
#include "runtime/region_index.h"
#include "runtime/task_records.h"

namespace pypto::runtime {

namespace {

constexpr size_t kWorkspaceAlign = 64;
// Workspaces of at least this size come from the output block cache (2 MiB size classes).
constexpr size_t kCachedWorkspaceBytes = size_t{1} << 20;

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

}  // namespace

size_t Runtime::task_record_bytes() { return sizeof(Task); }

size_t Runtime::region_record_bytes(int ndim) { return sizeof(const RegionDesc*) + 2 * sizeof(int64_t) * ndim; }

size_t Runtime::link_bytes() { return sizeof(Link); }

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

  static void* alloc_workspace(void* rt, int64_t bytes) {
    return guarded(rt, [&] { return self(rt)->alloc_workspace(bytes); }, static_cast<void*>(nullptr));
  }

  static void* alloc_workspace_uninit(void* rt, int64_t bytes) {
    return guarded(rt, [&] { return self(rt)->alloc_workspace(bytes, false); }, static_cast<void*>(nullptr));
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
  api_.alloc_workspace = &CApi::alloc_workspace;
  api_.failed = &CApi::failed;
  api_.tensor_handle = &CApi::tensor_handle;
  api_.task_submit_desc = &CApi::task_submit_desc;
  api_.alloc_workspace_uninit = &CApi::alloc_workspace_uninit;

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
  release_workspaces();
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
  std::unique_ptr<TaskFn> no_body;
  return submit(d, no_body);
}

bool Runtime::submit_desc(const pypto_task_desc& d, TaskFn fn) {
  auto body = std::make_unique<TaskFn>(std::move(fn));
  return submit(d, body);
}

bool Runtime::submit(const pypto_task_desc& d, std::unique_ptr<TaskFn>& body) {
  if (failed()) return false;
  const char* name = d.name != nullptr ? d.name : "<unnamed>";
  if ((d.fn == nullptr && !body) || d.buffer_bytes < 0 || static_cast<uint32_t>(d.nargs) > kMaxTaskRegions ||
      (d.nargs > 0 && d.args == nullptr) || static_cast<uint32_t>(d.nscalars) > 0xffff ||
      (d.nscalars > 0 && d.scalars == nullptr)) {
    reject_desc(d, body != nullptr, name, -1);
  }
  // Handles, modes and boxes are checked by the region index as it resolves the arguments. A body
  // runs instead of the kernel; the task's record takes it over when enqueue keeps the task.
  TaskSpec spec{next_task_id_, name, body ? nullptr : d.fn, body.get(), d.buffer_bytes, d.args,
                static_cast<size_t>(d.nargs), d.scalars, static_cast<size_t>(d.nscalars)};
  const int bad = enqueue(spec);
  if (spec.fn == nullptr) (void)body.release();
  if (bad >= 0) reject_desc(d, body != nullptr, name, bad);
  ++next_task_id_;
  return !failed();
}

pypto_tensor tensor_of(const pypto_region& r) {
  pypto_tensor t{};
  t.data = r.base;
  t.buffer = r.buffer;
  t.ndim = r.ndim;
  t.elem_size = r.elem_size;
  for (int k = 0; k < r.ndim && k < PYPTO_MAX_DIMS; ++k) {
    t.shape[k] = r.offset[k] + r.extent[k];
    t.stride[k] = r.stride[k];
  }
  return t;
}

bool Runtime::submit_regions(std::string name, TaskFn fn, const std::vector<pypto_region>& inputs,
                             const std::vector<pypto_region>& outputs, int64_t buffer_bytes) {
  const size_t n = inputs.size() + outputs.size();
  if (n > static_cast<size_t>(kMaxTaskRegions)) {
    throw std::invalid_argument("task " + std::to_string(next_task_id_) + " (" + name + ") has more than " +
                                std::to_string(kMaxTaskRegions) + " regions");
  }
  std::vector<pypto_task_arg> args(n);
  for (size_t i = 0; i < n; ++i) {
    const pypto_region& r = i < inputs.size() ? inputs[i] : outputs[i - inputs.size()];
    validate_region(r);
    args[i].tensor = tensor_handle(tensor_of(r));
    args[i].mode = i < inputs.size() ? PYPTO_ACCESS_IN : PYPTO_ACCESS_OUT;
    args[i].offset = r.offset;
    args[i].extent = r.extent;
  }
  fn_names_.push_back(std::move(name));
  pypto_task_desc d{fn_names_.back().c_str(), nullptr, buffer_bytes, args.data(), nullptr, static_cast<int32_t>(n), 0};
  return submit_desc(d, std::move(fn));
}

void Runtime::reject_desc(const pypto_task_desc& d, bool has_body, const char* name, int arg) {
  auto bad = [&](const std::string& what) {
    return std::invalid_argument("task_submit_desc: task " + std::to_string(next_task_id_) + " (" + name + ") " + what);
  };
  if (arg < 0) {
    if (d.fn == nullptr && !has_body) throw bad("has a null kernel function");
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
  if (a.mode != PYPTO_ACCESS_IN && a.mode != PYPTO_ACCESS_OUT && a.mode != PYPTO_ACCESS_ACCUM) {
    throw bad(which + " has access mode " + std::to_string(a.mode) +
              ", expected PYPTO_ACCESS_IN (1), PYPTO_ACCESS_OUT (2) or PYPTO_ACCESS_ACCUM (3)");
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
  const int bad = index_->add_task(st.task_args, st.nargs, seq, preds);
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
      descs[i] = index_->by_handle(st.task_args[i].tensor);
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
      const int64_t* offset = st.task_args[i].offset;
      const int64_t* extent = st.task_args[i].extent;
      const int nd = descs[i]->ndim;
      *reinterpret_cast<const RegionDesc**>(p) = descs[i];
      auto* box = reinterpret_cast<int64_t*>(p + sizeof(const RegionDesc*));
      copy_dims(offset, nd, box);
      copy_dims(extent, nd, box + nd);
      p += region_record_bytes(nd);
      int64_t region_bytes = descs[i]->elem_size;
      for (int k = 0; k < nd; ++k) region_bytes *= extent[k];
      run_bytes_ += region_bytes;
    }
    if (run_bytes_ >= internal::kParallelBytes) s.allow_wake();
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

namespace {

[[noreturn]] void workspace_too_large(int64_t bytes) {
  char gib[32];
  std::snprintf(gib, sizeof gib, "%.1f", static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  throw OutOfMemory("pypto: a workspace of " + std::to_string(bytes) + " bytes (" + gib + " GiB) could not be allocated");
}

// Recording and building run no task, so a workspace is only an address of its own: placeholders
// start above every user-space address (x86-64 and AArch64 keep those below 2^48) and stay below
// 2^62, so address arithmetic on them cannot overflow.
constexpr uint64_t kPlaceholderStart = uint64_t{1} << 56;
constexpr uint64_t kPlaceholderEnd = uint64_t{1} << 62;

}  // namespace

void* Runtime::alloc_workspace(int64_t bytes, bool zeroed) {
  // A negative size is a workspace whose element count overflowed 64 bits (pto::make_workspace).
  if (bytes < 0) throw OutOfMemory("pypto: a workspace of more than 2^63 bytes cannot be allocated");
  // aligned_alloc needs a size that is a non-zero multiple of the alignment.
  size_t size = (static_cast<size_t>(bytes) + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
  if (size == 0) size = kWorkspaceAlign;
  if (mode_ != Mode::kRun) {
    if (placeholder_next_ < kPlaceholderStart) placeholder_next_ = kPlaceholderStart;
    if (size > kPlaceholderEnd - placeholder_next_) workspace_too_large(bytes);
    void* p = reinterpret_cast<void*>(static_cast<uintptr_t>(placeholder_next_));
    placeholder_next_ += size + kWorkspaceAlign;  // a gap, so no two workspaces touch
    return p;
  }
  // Large workspaces come from the output block cache: a repeated call gets memory whose pages are
  // already mapped instead of faulting in fresh ones (a 7 MB im2col tensor cost ~600 page faults
  // per call).
  const bool cached = size >= kCachedWorkspaceBytes && BlockCache::instance().limit() > 0;
  void* p = nullptr;
  if (cached) {
    try {
      p = BlockCache::instance().acquire(size);
    } catch (const std::bad_alloc&) {
      workspace_too_large(bytes);
    }
  } else {
    p = std::aligned_alloc(kWorkspaceAlign, size);
    if (p == nullptr) workspace_too_large(bytes);
  }
  if (zeroed) std::memset(p, 0, size);
  std::lock_guard<std::mutex> lock(workspace_mu_);
  workspaces_.emplace_back(p, cached ? size : 0);
  return p;
}

void Runtime::release_workspaces() {
  std::lock_guard<std::mutex> lock(workspace_mu_);
  for (const auto& [p, cached_bytes] : workspaces_) {
    if (cached_bytes > 0) {
      BlockCache::instance().release(p, cached_bytes);
    } else {
      std::free(p);
    }
  }
  workspaces_.clear();
}

Runtime& default_runtime() {
  // Intentionally leaked: joining workers during static destruction races with
  // interpreter shutdown, and the OS reclaims the threads at exit anyway.
  static Runtime* rt = new Runtime(0);
  return *rt;
}

}  // namespace pypto::runtime
