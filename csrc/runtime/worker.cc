// The runtime's execution side: worker threads, running a task's kernel, reclaiming finished
// records, failures, and the run/record/build entry points (see runtime.h).
#include <chrono>
#include <exception>
#include <string>

#include "runtime/region_index.h"
#include "runtime/task_records.h"

namespace pypto::runtime {

void Runtime::worker_loop(int tid) {
  Scheduler& s = *sched_;
  for (;;) {
    if (Task* t = s.pop()) {
      while (t != nullptr) t = execute(t, tid);
      continue;
    }
    const auto until = std::chrono::steady_clock::now() + internal::kSpin;
    for (int i = 1; s.size.load(std::memory_order_relaxed) <= 0; ++i) {
      if (s.shutdown.load(std::memory_order_relaxed)) return;
      internal::cpu_relax();
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

Runtime::Task* Runtime::execute(Task* task, int tid) {
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
  // The first successor this task makes ready runs next on this thread (a chain of dependent tasks
  // stays on one core, with its data in that core's caches, and skips the queue); the others are queued.
  Task* next = nullptr;
  while (l != nullptr) {
    // Read the link before releasing its task: once ready, the successor may run and be freed.
    Link* after = l->next;
    Task* s = l->succ;
    if (s->pending.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      if (next == nullptr) next = s;
      else sched_->push(s);
    }
    l = after;
  }
  // The record may be reclaimed by the orchestrating thread as soon as `done` is set.
  task->done.store(1, std::memory_order_seq_cst);
  sched_->wake_main();
  return next;
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
      // Follow the chain while the orchestration still has to wait; once it may go on, the next task
      // is queued for the workers.
      while ((t = execute(t, 0)) != nullptr) {
        if (satisfied()) {
          s.push(t);
          break;
        }
      }
      continue;
    }
    // Nothing is ready: the oldest live task runs on a worker. Spin briefly, then sleep until a
    // task finishes or becomes ready.
    Task* oldest = s.slots[static_cast<uint64_t>(tail_seq_) & s.mask];
    auto progress = [&] {
      return s.size.load(std::memory_order_seq_cst) > 0 || oldest->done.load(std::memory_order_seq_cst) != 0;
    };
    const auto until = std::chrono::steady_clock::now() + internal::kSpin;
    bool moved = false;
    for (int i = 1; !(moved = progress()); ++i) {
      internal::cpu_relax();
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
  run_bytes_ = 0;
  sched_->wake_workers.store(mode != Mode::kRun || internal::kParallelBytes <= 0, std::memory_order_seq_cst);
}

void Runtime::end_run() {
  sched_->wake_workers.store(true, std::memory_order_seq_cst);
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    last_stats_ = stats_;
  }
  fn_names_.clear();
  placeholder_next_ = 0;
  std::vector<int64_t>().swap(record_ids_);
  release_workspaces();
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

}  // namespace pypto::runtime
