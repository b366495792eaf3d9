// The runtime's task records and scheduler state, shared by the files of the runtime:
// runtime.cc (construction, the C function table, submission and the region index),
// worker.cc (worker threads, execution, reclaiming records, runs) and trace.cc (PYPTO_TRACE).
// Nothing outside csrc/runtime includes this header.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

#include "runtime/runtime.h"

namespace pypto::runtime {

namespace internal {

// Arena bytes reserved per task of the window; a record larger than a quarter of the arena is refused.
constexpr uint64_t kArenaBytesPerTask = 384;
constexpr uint64_t kMinArenaBytes = uint64_t{1} << 20;
// How long an idle thread spins for new work before it sleeps.
constexpr auto kSpin = std::chrono::microseconds(50);
// Bytes of task regions a run submits before it wakes sleeping workers: below this the work costs
// less than a wake-up (a system call and a context switch, several microseconds), so the calling
// thread runs it alone; workers that are awake still take tasks.
constexpr int64_t kParallelBytes = int64_t{64} << 10;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
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

}  // namespace internal

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

// ----------------------------------------------------------------------------------------------
// The scheduler: a ring arena of task records, the slot table that maps submission numbers to
// records, and a FIFO ready queue. Idle threads spin briefly, then sleep on a condition variable.

struct Runtime::Scheduler {
  // Ready queue (capacity = slots, since ready tasks are live tasks).
  internal::SpinLock lock;
  std::vector<Task*> ring;
  uint64_t head = 0;
  uint64_t tail = 0;
  std::atomic<int64_t> size{0};

  std::mutex sleep_mu;
  std::condition_variable work_cv;
  std::condition_variable main_cv;
  std::atomic<int> sleepers{0};
  std::atomic<bool> main_waiting{false};
  // Whether push() wakes sleeping workers (off at the start of a run until its work is worth it).
  std::atomic<bool> wake_workers{true};
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
    const uint64_t bytes = std::max(internal::kMinArenaBytes, (static_cast<uint64_t>(window) * internal::kArenaBytesPerTask + 63) / 64 * 64);
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
    if (wake_workers.load(std::memory_order_relaxed) && sleepers.load(std::memory_order_seq_cst) > 0) {
      std::lock_guard<std::mutex> g(sleep_mu);
      work_cv.notify_one();
    }
    wake_main();
  }

  /// Lets push() wake workers again, and wakes the sleepers for the tasks already queued.
  void allow_wake() {
    if (wake_workers.exchange(true, std::memory_order_seq_cst)) return;
    if (sleepers.load(std::memory_order_seq_cst) > 0 && size.load(std::memory_order_seq_cst) > 0) {
      std::lock_guard<std::mutex> g(sleep_mu);
      work_cv.notify_all();
    }
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

}  // namespace pypto::runtime
