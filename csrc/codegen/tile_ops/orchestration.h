// What the orchestration calls: region pointers and checks, error messages, workspaces, views and reshapes.
// Part of codegen/tile_ops.h, which includes the parts in order (and nothing else does).

namespace pto {

/// Element pointer of a region's origin.
template <typename T>
inline T* region_data(const pypto_region& r) {
  int64_t off = 0;
  for (int d = 0; d < r.ndim; ++d) off += r.offset[d] * r.stride[d];
  return static_cast<T*>(r.base) + off;
}

/// The message of the last failed region check on this thread.
inline char* region_error_text() {
  static thread_local char text[512];
  return text;
}

/// Writes why the box `off`/`ext` is outside tensor `t` in dim `d` to
/// region_error_text() and returns 4 (the orchestration's status).
[[gnu::cold, gnu::noinline]] inline int32_t region_error(const pypto_tensor& t, const int64_t* off,
                                                         const int64_t* ext, int d, const char* where) {
  snprintf(region_error_text(), 512, "%s: dim %d of the region is [%lld, %lld), outside the tensor's extent %lld",
           where, d, static_cast<long long>(off[d]), static_cast<long long>(off[d] + ext[d]),
           static_cast<long long>(t.shape[d]));
  return PYPTO_STATUS_REGION;
}

/// 0 when the box `off`/`ext` of rank N lies inside tensor `t`; otherwise the
/// status of region_error.
template <int N>
[[gnu::always_inline]] inline int32_t check_region(const pypto_tensor& t, const int64_t* off, const int64_t* ext, const char* where) {
  for (int d = 0; d < N; ++d) {
    // off <= shape first, so shape - off cannot overflow.
    if (__builtin_expect(off[d] < 0 || ext[d] < 0 || off[d] > t.shape[d] || ext[d] > t.shape[d] - off[d], 0)) {
      return region_error(t, off, ext, d, where);
    }
  }
  return 0;
}

/// Writes why dim `d` of an access, [lo, hi), is outside [0, limit) to region_error_text() and
/// returns 4 (the orchestration's status).
[[gnu::cold, gnu::noinline]] inline int32_t bound_error(int64_t lo, int64_t hi, int64_t limit, int d, const char* where) {
  snprintf(region_error_text(), 512, "%s: dim %d of the access is [%lld, %lld), outside the region's extent %lld", where,
           d, static_cast<long long>(lo), static_cast<long long>(hi), static_cast<long long>(limit));
  return PYPTO_STATUS_REGION;
}

/// Orchestration, per CALL: 0 when the callee's accesses in dim `d`, [lo, hi), lie inside [0, limit).
[[gnu::always_inline]] inline int32_t check_bound(int64_t lo, int64_t hi, int64_t limit, int d, const char* where) {
  if (__builtin_expect(lo < 0 || hi > limit, 0)) return bound_error(lo, hi, limit, d, where);
  return 0;
}

/// Orchestration: `*out` := the element of `t` at `index` (rank N), or PYPTO_STATUS_REGION with the
/// reason in region_error_text() when the index is outside the tensor.
template <typename T, int N>
inline int32_t read_scalar(int64_t* out, const pypto_tensor& t, const int64_t* index, const char* where) {
  int64_t off = 0;
  for (int d = 0; d < N; ++d) {
    if (__builtin_expect(index[d] < 0 || index[d] >= t.shape[d], 0)) {
      snprintf(region_error_text(), 512, "%s: index %lld of dim %d is outside the tensor's extent %lld", where,
               static_cast<long long>(index[d]), d, static_cast<long long>(t.shape[d]));
      return PYPTO_STATUS_REGION;
    }
    off += index[d] * t.stride[d];
  }
  *out = static_cast<int64_t>(static_cast<const T*>(t.data)[off]);
  return 0;
}

/// Orchestration: a symbolic divisor (or loop step) `what` is 0 (or not positive) at run time.
[[gnu::cold, gnu::noinline]] inline int32_t zero_error(const char* what) {
  snprintf(region_error_text(), 512, "%s", what);
  return PYPTO_STATUS_ZERO;
}

/// The message of the first kernel that returned PYPTO_STATUS_ACCESS since it was last taken
/// (kernels run on worker threads, so it is process-wide): state 0 empty, 1 being written, 2 set.
inline char* kernel_error_text() {
  static char text[512];
  return text;
}
inline int& kernel_error_state() {  // accessed through the __atomic builtins (no <atomic>: compile time)
  static int state = 0;
  return state;
}
inline int32_t& kernel_error_status() {
  static int32_t status = 0;
  return status;
}
/// Copies the recorded message into `out` and returns its status (0: none recorded).
inline int32_t take_kernel_error(char* out, int32_t cap) {
  if (__atomic_load_n(&kernel_error_state(), __ATOMIC_ACQUIRE) != 2 || cap <= 0) return 0;
  snprintf(out, static_cast<size_t>(cap), "%s", kernel_error_text());
  const int32_t status = kernel_error_status();
  __atomic_store_n(&kernel_error_state(), 0, __ATOMIC_RELEASE);
  return status;
}

/// Kernel: records `what` as the kernel's error (the first since it was last taken) and returns
/// `status`.
[[gnu::cold, gnu::noinline]] inline int32_t kernel_error(int32_t status, const char* what) {
  int expect = 0;
  if (__atomic_compare_exchange_n(&kernel_error_state(), &expect, 1, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    snprintf(kernel_error_text(), 512, "%s", what);
    kernel_error_status() = status;
    __atomic_store_n(&kernel_error_state(), 2, __ATOMIC_RELEASE);
  }
  return status;
}
[[gnu::cold, gnu::noinline]] inline int32_t kernel_zero_error(const char* what) {
  return kernel_error(PYPTO_STATUS_ZERO, what);
}

/// Kernel, before an access the compiler could not bound: 0 when its box (offsets `off`, valid
/// extents `ext` clamped to the tile as the tile ops clamp them) lies inside the region's extents
/// `limit`; dim `skip` (a gather's or scatter's indexed axis, -1: none) is checked per index.
inline int32_t check_access(int rank, const int64_t* off, const int64_t* ext, const int64_t* tile, const int64_t* limit,
                            int skip, const char* where) {
  for (int d = 0; d < rank; ++d) {
    const int64_t e = ext[d] < 0 ? 0 : ext[d] > tile[d] ? tile[d] : ext[d];
    if (e == 0) return 0;  // nothing is touched
  }
  for (int d = 0; d < rank; ++d) {
    if (d == skip) continue;
    const int64_t e = ext[d] > tile[d] ? tile[d] : ext[d];
    if (__builtin_expect(off[d] >= 0 && off[d] <= limit[d] && e <= limit[d] - off[d], 1)) continue;
    long long hi;
    if (__builtin_add_overflow(static_cast<long long>(off[d]), static_cast<long long>(e), &hi)) hi = LLONG_MAX;
    char text[512];
    snprintf(text, sizeof text, "%s: dim %d of the access is [%lld, %lld), outside the region's extent %lld", where, d,
             static_cast<long long>(off[d]), hi, static_cast<long long>(limit[d]));
    return kernel_error(PYPTO_STATUS_ACCESS, text);
  }
  return 0;
}

/// A contiguous global workspace tensor for the current run: zeroed, or (`zeroed` false, for a
/// tensor whose every element is written before it is read) with unspecified contents.
inline pypto_tensor make_workspace(const pypto_runtime_api* api, int32_t ndim, const int64_t* shape, int32_t elem_size,
                                   bool zeroed) {
  pypto_tensor t;
  t.ndim = ndim;
  t.elem_size = elem_size;
  int64_t n = 1;
  bool overflow = false;
  for (int d = ndim - 1; d >= 0; --d) {
    t.shape[d] = shape[d];
    t.stride[d] = n;
    overflow = __builtin_mul_overflow(n, shape[d], &n) || overflow;
  }
  int64_t bytes = 0;
  overflow = __builtin_mul_overflow(n, int64_t{elem_size}, &bytes) || overflow;
  // A size past 2^63 bytes goes as -1: the runtime reports it as a failed allocation.
  t.data = (zeroed ? api->alloc_workspace : api->alloc_workspace_uninit)(api->rt, overflow ? -1 : bytes);
  t.buffer = t.data;
  return t;
}

/// A strided view of `b` into `*t`: view dim v walks base dim map[v] with step
/// step[v] (map -1: a broadcast or new dim, stride 0); `off` is the view's
/// origin in base elements, one per base dim. A view may reach past the end of
/// its base (the tail block of a view with a valid shape): each dim of `*t` is
/// cut to the part inside the base, and a CALL region of the view is cut the
/// same way (clip_region). Returns PYPTO_STATUS_REGION, with the reason in
/// region_error_text(), when a dim has a negative extent, the view starts
/// before its base, or two view dims walk one base dim past its end.
inline int32_t make_view(pypto_tensor* t, const pypto_tensor& b, int32_t ndim, const int64_t* shape, const int64_t* off,
                         const int32_t* map, const int64_t* step, const char* where) {
  t->ndim = ndim;
  t->elem_size = b.elem_size;
  t->buffer = b.buffer;
  bool empty = false;
  for (int v = 0; v < ndim; ++v) {
    if (shape[v] < 0) {
      snprintf(region_error_text(), 512, "%s: dim %d of the view has negative extent %lld", where, v,
               static_cast<long long>(shape[v]));
      return PYPTO_STATUS_REGION;
    }
    empty = empty || shape[v] == 0;
    t->shape[v] = shape[v];
    t->stride[v] = map[v] >= 0 ? b.stride[map[v]] * step[v] : 0;
  }
  int64_t o = 0;
  for (int d = 0; d < b.ndim && !empty; ++d) {
    int walkers = 0;
    for (int v = 0; v < ndim; ++v) walkers += map[v] == d;
    if (off[d] < 0 || off[d] >= b.shape[d]) {
      // Past the end, nothing of the view lies in the base; before the start, the view is wrong.
      if (off[d] >= 0 && walkers <= 1) {
        for (int v = 0; v < ndim; ++v) t->shape[v] = 0;
        empty = true;
        break;
      }
      snprintf(region_error_text(), 512, "%s: the view starts at %lld in dim %d of its base, outside its extent %lld",
               where, static_cast<long long>(off[d]), d, static_cast<long long>(b.shape[d]));
      return PYPTO_STATUS_REGION;
    }
    o += off[d] * b.stride[d];
    for (int v = 0; v < ndim; ++v) {
      if (map[v] != d) continue;
      // Coordinates off + k * step for k < shape[v]: how many stay inside [0, extent).
      const int64_t s = step[v];
      const int64_t room = s > 0 ? (b.shape[d] - 1 - off[d]) / s + 1 : s < 0 ? off[d] / -s + 1 : shape[v];
      if (room < shape[v]) {
        if (walkers > 1) {
          snprintf(region_error_text(), 512, "%s: dim %d of the view reaches past dim %d of its base (extent %lld)",
                   where, v, d, static_cast<long long>(b.shape[d]));
          return PYPTO_STATUS_REGION;
        }
        t->shape[v] = room;
      }
    }
  }
  t->data = static_cast<char*>(b.data) + (empty ? 0 : o) * b.elem_size;
  return 0;
}

/// A CALL region of a view: the part inside the view (make_view cut the view to its base). The
/// region must not start before the view's origin; `ext` is cut to what lies inside.
template <int N>
[[gnu::always_inline]] inline int32_t clip_region(const pypto_tensor& t, const int64_t* off, int64_t* ext, const char* where) {
  for (int d = 0; d < N; ++d) {
    if (__builtin_expect(off[d] < 0 || ext[d] < 0, 0)) return region_error(t, off, ext, d, where);
    const int64_t room = off[d] >= t.shape[d] ? 0 : t.shape[d] - off[d];
    if (ext[d] > room) ext[d] = room;
  }
  return 0;
}

/// 0 when `shape` (no negative dim) has as many elements as `b`; otherwise writes why to
/// region_error_text() and returns PYPTO_STATUS_REGION.
inline int32_t check_reshape(const pypto_tensor& b, int32_t ndim, const int64_t* shape, int32_t elem_size,
                             const char* where) {
  long long n = elem_size, m = b.elem_size;
  bool bad = false;
  for (int d = 0; d < ndim; ++d) bad = bad || shape[d] < 0 || __builtin_mul_overflow(n, static_cast<long long>(shape[d]), &n);
  for (int d = 0; d < b.ndim; ++d) m *= b.shape[d];
  if (!bad && n == m) return 0;
  snprintf(region_error_text(), 512, "%s: the new shape has %lld bytes, the tensor %lld", where, bad ? -1LL : n, m);
  return PYPTO_STATUS_REGION;
}

/// `b` with another shape of the same size in bytes, its elements `elem_size` bytes each (a
/// reshape keeps b's, a bitcast changes it); `ok` is cleared when `b` is not contiguous (the caller
/// then reports an error).
inline pypto_tensor make_reshape(const pypto_tensor& b, int32_t ndim, const int64_t* shape, int32_t elem_size, int* ok) {
  int64_t expect = 1;
  for (int d = b.ndim - 1; d >= 0; --d) {
    if (b.shape[d] != 1 && b.stride[d] != expect) *ok = 0;
    expect *= b.shape[d];
  }
  pypto_tensor t;
  t.ndim = ndim;
  t.elem_size = elem_size;
  t.buffer = b.buffer;
  t.data = b.data;
  int64_t n = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    t.shape[d] = shape[d];
    t.stride[d] = n;
    n *= shape[d];
  }
  return t;
}

}  // namespace pto
