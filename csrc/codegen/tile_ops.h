// PTO tile instructions for the CPU backend.
//
// Generated InCore kernels call these templates; codegen pastes this header
// (after pypto_abi.h) into every generated source file. Tiles are row-major
// arrays of compile-time size, 64-byte aligned, with no aliasing between
// operands except where an instruction says so (an accumulator may be both
// destination and first source), so loops over them vectorise.
#ifndef PYPTO_TILE_OPS_H_
#define PYPTO_TILE_OPS_H_

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <climits>
#include <cmath>
#include <limits>
#include <type_traits>

#if defined(__SSE2__)
#include <immintrin.h>
#define PTO_STREAM_STORES 1
#endif

namespace pto {

/// bfloat16 storage: the top 16 bits of an IEEE float.
struct bf16 {
  uint16_t bits;
};

/// A per-thread, 64-byte-aligned buffer that grows to the largest size asked
/// (local buffers whose size depends on a symbolic dim).
struct Scratch {
  void* p = nullptr;
  size_t bytes = 0;
  /// Room for `count` elements, or nullptr when `count` is negative or the memory cannot be had.
  template <typename T>
  T* get(int64_t count) {
    if (count < 0 || static_cast<uint64_t>(count) > (UINT64_MAX - 63) / sizeof(T)) return nullptr;
    size_t need = (static_cast<size_t>(count) * sizeof(T) + 63) / 64 * 64;
    if (need > bytes) {
      void* q = aligned_alloc(64, need ? need : 64);
      if (q == nullptr) return nullptr;
      free(p);
      p = q;
      bytes = need;
    }
    return static_cast<T*>(p);
  }
  ~Scratch() { free(p); }
};

/// Converts between storage and compute types (bf16 by bit manipulation,
/// rounding to nearest even; everything else by the language's conversion).
template <typename D, typename S>
inline D cvt(S v) {
  return static_cast<D>(v);
}
template <>
inline float cvt<float, bf16>(bf16 v) {
  uint32_t u = uint32_t(v.bits) << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
template <>
inline bf16 cvt<bf16, float>(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{uint16_t((u >> 16) | 0x40)};  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return bf16{uint16_t(u >> 16)};
}
template <>
inline bool cvt<bool, float>(float v) {
  return v != 0.0f;
}
template <>
inline bool cvt<bool, double>(double v) {
  return v != 0.0;
}

/// Start values of max/min reductions: -inf/inf for floats, the extremes for integers.
template <typename T>
inline T lowest() {
  return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
}
template <typename T>
inline T highest() {
  return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::max();
}

/// Floor division; total, so that no operand traps: generated code checks a symbolic divisor
/// for 0 before it divides (zero_error), and INT64_MIN // -1 wraps.
inline int64_t floordiv(int64_t a, int64_t b) {
  if (__builtin_expect(b == 0, 0)) return 0;
  if (__builtin_expect(b == -1, 0)) return static_cast<int64_t>(0 - static_cast<uint64_t>(a));
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
inline int64_t floormod(int64_t a, int64_t b) { return a - floordiv(a, b) * b; }

/// The next value of a FOR variable `v` (< `stop`, `step` > 0): `v + step`, or `stop` when that would
/// reach or pass it, so that a step near 2^63 ends the loop instead of overflowing.
inline int64_t loop_next(int64_t v, int64_t step, int64_t stop) {
  return static_cast<uint64_t>(stop) - static_cast<uint64_t>(v) > static_cast<uint64_t>(step) ? v + step : stop;
}
inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }

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
inline std::atomic<int>& kernel_error_state() {
  static std::atomic<int> state{0};
  return state;
}
inline int32_t& kernel_error_status() {
  static int32_t status = 0;
  return status;
}
/// Copies the recorded message into `out` and returns its status (0: none recorded).
inline int32_t take_kernel_error(char* out, int32_t cap) {
  if (kernel_error_state().load(std::memory_order_acquire) != 2 || cap <= 0) return 0;
  snprintf(out, static_cast<size_t>(cap), "%s", kernel_error_text());
  const int32_t status = kernel_error_status();
  kernel_error_state().store(0, std::memory_order_release);
  return status;
}

/// Kernel: records `what` as the kernel's error (the first since it was last taken) and returns
/// `status`.
[[gnu::cold, gnu::noinline]] inline int32_t kernel_error(int32_t status, const char* what) {
  int expect = 0;
  if (kernel_error_state().compare_exchange_strong(expect, 1, std::memory_order_acq_rel)) {
    snprintf(kernel_error_text(), 512, "%s", what);
    kernel_error_status() = status;
    kernel_error_state().store(2, std::memory_order_release);
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

/// A zeroed, contiguous global workspace tensor for the current run.
inline pypto_tensor make_workspace(const pypto_runtime_api* api, int32_t ndim, const int64_t* shape, int32_t elem_size) {
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
  t.data = api->alloc_workspace(api->rt, overflow ? -1 : bytes);
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
inline int32_t check_reshape(const pypto_tensor& b, int32_t ndim, const int64_t* shape, const char* where) {
  long long n = 1, m = 1;
  bool bad = false;
  for (int d = 0; d < ndim; ++d) bad = bad || shape[d] < 0 || __builtin_mul_overflow(n, static_cast<long long>(shape[d]), &n);
  for (int d = 0; d < b.ndim; ++d) m *= b.shape[d];
  if (!bad && n == m) return 0;
  snprintf(region_error_text(), 512, "%s: the new shape has %lld elements, the tensor %lld", where, bad ? -1LL : n, m);
  return PYPTO_STATUS_REGION;
}

/// `b` with another shape of the same element count; `ok` is cleared when
/// `b` is not contiguous (the caller then reports an error).
inline pypto_tensor make_reshape(const pypto_tensor& b, int32_t ndim, const int64_t* shape, int* ok) {
  int64_t expect = 1;
  for (int d = b.ndim - 1; d >= 0; --d) {
    if (b.shape[d] != 1 && b.stride[d] != expect) *ok = 0;
    expect *= b.shape[d];
  }
  pypto_tensor t;
  t.ndim = ndim;
  t.elem_size = b.elem_size;
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

/// Row `r` of a tile of shape `tshape` (rows = all dims but the last): its element offset in a
/// box with strides `stride`, and whether it lies inside the `valid` box. Rank 1 and 2 need no
/// division.
inline void row_position(int rank, const int64_t* tshape, const int64_t* valid, const int64_t* stride, int64_t r,
                         int64_t& off, bool& inside) {
  if (rank <= 1) {
    off = 0;
    inside = true;
    return;
  }
  if (rank == 2) {
    off = r * stride[0];
    inside = r < valid[0];
    return;
  }
  off = 0;
  inside = true;
  int64_t rem = r;
  for (int d = rank - 2; d >= 0; --d) {
    const int64_t i = rem % tshape[d];
    rem /= tshape[d];
    inside = inside && i < valid[d];
    off += i * stride[d];
  }
}

/// TLOAD: the box of `rank` dims at `src` (element strides `stride`, `valid`
/// elements per dim) into a tile of shape `tshape` whose last dim is C; tile
/// elements outside the valid box are zero.
template <typename T, int64_t C, typename S>
inline void tload(T* __restrict dst, int rank, const int64_t* tshape, const S* __restrict src, const int64_t* stride,
                  const int64_t* valid) {
  int64_t rows = 1;
  for (int d = 0; d < rank - 1; ++d) rows *= tshape[d];
  // The valid extent clamped to [0, C] (a negative one moves nothing).
  const int64_t vc = valid[rank - 1] < 0 ? 0 : valid[rank - 1] < C ? valid[rank - 1] : C;
  const int64_t sc = stride[rank - 1];
  for (int64_t r = 0; r < rows; ++r) {
    int64_t off = 0;
    bool inside = true;
    row_position(rank, tshape, valid, stride, r, off, inside);
    T* __restrict drow = dst + r * C;
    if (!inside) {
      for (int64_t c = 0; c < C; ++c) drow[c] = T(0);
      continue;
    }
    const S* __restrict srow = src + off;
    if (sc == 1 && vc == C) {
      for (int64_t c = 0; c < C; ++c) drow[c] = cvt<T>(srow[c]);
    } else {
      for (int64_t c = 0; c < vc; ++c) drow[c] = cvt<T>(srow[c * sc]);
      for (int64_t c = vc; c < C; ++c) drow[c] = T(0);
    }
  }
}

/// TLOAD of a tile that is only read: when the whole tile lies densely at `src` (every dim valid,
/// innermost stride 1, each outer stride the size of the tile dims inside it) the tile is `src`
/// itself and nothing is copied; otherwise it is loaded into `buf` as tload does.
template <typename T, int64_t C>
inline const T* tload_view(T* __restrict buf, int rank, const int64_t* tshape, const T* src, const int64_t* stride,
                           const int64_t* valid) {
  bool dense = true;
  int64_t inner = 1;
  for (int d = rank - 1; d >= 0; --d) {
    dense = dense && valid[d] >= tshape[d] && (tshape[d] == 1 || stride[d] == inner);
    inner *= tshape[d];
  }
  if (dense) return src;
  tload<T, C>(buf, rank, tshape, src, stride, valid);
  return buf;
}

#ifdef PTO_STREAM_STORES
/// Writes one full row of C floats to a 64-byte-aligned `drow` with non-temporal (streaming) stores,
/// which do not first read the destination's cache lines from memory.
template <int64_t C>
inline void stream_row(float* drow, const float* srow) {
#if defined(__AVX512F__)
  for (int64_t c = 0; c < C; c += 16) _mm512_stream_ps(drow + c, _mm512_loadu_ps(srow + c));
#elif defined(__AVX__)
  for (int64_t c = 0; c < C; c += 8) _mm256_stream_ps(drow + c, _mm256_loadu_ps(srow + c));
#else
  for (int64_t c = 0; c < C; c += 4) _mm_stream_ps(drow + c, _mm_loadu_ps(srow + c));
#endif
}
#endif

/// Stores N values at `dst` with element stride `stride`, converted to the destination type (a full
/// tile row, or a strip of a fused chain). With STREAM, a dense float row starting on a 64-byte
/// boundary goes through stream_row.
template <bool STREAM, int64_t N, typename S, typename T>
inline void store_strip(S* __restrict dst, int64_t stride, const T* __restrict src) {
  if (stride == 1) {
#ifdef PTO_STREAM_STORES
    if constexpr (STREAM && std::is_same<T, float>::value && std::is_same<S, float>::value && N % 16 == 0) {
      if ((reinterpret_cast<uintptr_t>(dst) & 63) == 0) {
        stream_row<N>(dst, src);
        return;
      }
    }
#endif
    for (int64_t k = 0; k < N; ++k) dst[k] = cvt<S>(src[k]);
  } else {
    for (int64_t k = 0; k < N; ++k) dst[k * stride] = cvt<S>(src[k]);
  }
}

/// TSTORE: the valid part of a tile (last dim C) into a strided box. With STREAM, full float rows
/// whose start is 64-byte aligned go through stream_row.
template <typename T, int64_t C, typename S, bool STREAM = false>
inline void tstore(S* __restrict dst, const int64_t* stride, const int64_t* valid, int rank, const int64_t* tshape,
                   const T* __restrict src) {
  int64_t rows = 1;
  for (int d = 0; d < rank - 1; ++d) rows *= tshape[d];
  // The valid extent clamped to [0, C] (a negative one moves nothing).
  const int64_t vc = valid[rank - 1] < 0 ? 0 : valid[rank - 1] < C ? valid[rank - 1] : C;
  const int64_t sc = stride[rank - 1];
  for (int64_t r = 0; r < rows; ++r) {
    int64_t off = 0;
    bool inside = true;
    row_position(rank, tshape, valid, stride, r, off, inside);
    if (!inside) continue;
    const T* __restrict srow = src + r * C;
    S* __restrict drow = dst + off;
    if (vc == C) {
      store_strip<STREAM, C>(drow, sc, srow);
    } else if (sc == 1) {
      for (int64_t c = 0; c < vc; ++c) drow[c] = cvt<S>(srow[c]);
    } else {
      for (int64_t c = 0; c < vc; ++c) drow[c * sc] = cvt<S>(srow[c]);
    }
  }
}

/// TSTORE into a large output that is not read again soon (see tstore's STREAM). A kernel that
/// calls it ends with stream_fence().
template <typename T, int64_t C, typename S>
inline void tstore_stream(S* __restrict dst, const int64_t* stride, const int64_t* valid, int rank,
                          const int64_t* tshape, const T* __restrict src) {
  tstore<T, C, S, true>(dst, stride, valid, rank, tshape, src);
}

/// Orders a kernel's streaming stores before the runtime marks its task finished.
inline void stream_fence() {
#ifdef PTO_STREAM_STORES
  _mm_sfence();
#endif
}

template <typename T, int64_t N>
inline void tfill(T* __restrict dst, T value) {
  for (int64_t i = 0; i < N; ++i) dst[i] = value;
}

/// TARANGE: dst[i] = start + (offset + i) * step.
template <typename T, int64_t N>
inline void tarange(T* __restrict dst, double start, double step, int64_t offset) {
  for (int64_t i = 0; i < N; ++i) dst[i] = static_cast<T>(start + static_cast<double>(offset + i) * step);
}

template <typename T, int64_t N>
inline void tcopy(T* __restrict dst, const T* __restrict src) {
  for (int64_t i = 0; i < N; ++i) dst[i] = src[i];
}

/// Vectorisable float math. Each function is straight-line code (selects, no
/// branches, no calls), so a tile loop that applies it compiles to packed SIMD
/// instructions. Maximum errors over all finite floats, measured by
/// cpp_tests/codegen/vector_math_test.cc against double-precision libm:
/// exp 1 ulp, log 1 ulp, tanh 2 ulp, erf 2 ulp, rsqrt 1 ulp. inf, nan and
/// denormal inputs and results behave as in libm. Other types use <cmath>.
namespace vm {

inline float from_bits(int32_t i) { return __builtin_bit_cast(float, i); }
inline int32_t to_bits(float f) { return __builtin_bit_cast(int32_t, f); }

/// c0 + c1 x + c2 x^2 + ... by Horner's rule with fused multiply-adds (unrolled at compile time,
/// so loops calling it still vectorise).
inline float poly(float, float c0) { return c0; }
template <typename... C>
inline float poly(float x, float c0, C... c) {
  return std::fma(poly(x, c...), x, c0);
}

/// 2^n for n in [-252, 254] as a product of two normal powers of two.
inline float pow2i_product(float y, int32_t n) {
  const int32_t n1 = n >> 1;
  const int32_t n2 = n - n1;
  // Shifted as unsigned: for a nan input `n` is garbage (the caller discards the result), and a
  // signed shift of it would be undefined.
  return y * from_bits(static_cast<int32_t>(static_cast<uint32_t>(n1 + 127) << 23)) *
         from_bits(static_cast<int32_t>(static_cast<uint32_t>(n2 + 127) << 23));
}

inline float exp(float x) {
  // exp(x) = 2^n * e^r with n = round(x / ln 2), |r| <= ln(2) / 2.
  const float xc = x < -104.0f ? -104.0f : (x > 89.0f ? 89.0f : x);
  const float t = std::fma(xc, 1.44269504088896341f, 12582912.0f);  // rounds through 1.5 * 2^23
  const float n = t - 12582912.0f;
  const int32_t ni = to_bits(t) - 0x4B400000;
  float r = std::fma(n, -0.693359375f, xc);
  r = std::fma(n, 2.12194440e-4f, r);
  const float p = poly(r, 1.0f, 1.0f, 0.5f, 1.0f / 6, 1.0f / 24, 1.0f / 120, 1.0f / 720, 1.0f / 5040);
  float y = pow2i_product(p, ni);
  y = x > 88.72283935546875f ? std::numeric_limits<float>::infinity() : y;
  return x != x ? x : y;
}

inline float log(float x) {
  // log(x) = e ln 2 + log(m), m in [sqrt(1/2), sqrt(2)), log(1 + f) = f - f^2/2 + f^3 P(f).
  const bool sub = x < 1.17549435e-38f;
  const int32_t i = to_bits(sub ? x * 8388608.0f : x);
  const int32_t mant = (i & 0x007fffff) | 0x3f800000;
  const int32_t big = mant > 0x3fb504f3 ? 1 : 0;  // m > sqrt(2): halve m
  const int32_t e = ((i >> 23) & 0xff) - (sub ? 150 : 127) + big;
  const float f = from_bits(mant - (big << 23)) - 1.0f;
  const float p = poly(f, 0.3333333134651184f, -0.2500030994415283f, 0.20000775158405304f, -0.16640795767307281f,
                           0.14222414791584015f, -0.13013280928134918f, 0.1256403625011444f, -0.07779280841350555f);
  const float f2 = f * f;
  const float fe = static_cast<float>(e);
  float y = std::fma(f2 * f, p, std::fma(-0.5f, f2, f));
  y = std::fma(fe, -2.12194440e-4f, y);
  y = std::fma(fe, 0.693359375f, y);
  // Zero, negative, inf and nan inputs give -inf, nan, inf and nan. The blend is done on bits:
  // a select would let the compiler move the polynomial under a branch, which stops vectorisation.
  const float inf = std::numeric_limits<float>::infinity();
  const float special = x == 0.0f ? -inf : (x > 0.0f ? x : std::numeric_limits<float>::quiet_NaN());
  const int32_t ok = -static_cast<int32_t>((x > 0.0f) & (x < inf));
  return from_bits((to_bits(y) & ok) | (to_bits(special) & ~ok));
}

inline float tanh(float x) {
  // |x| < 0.625: x + x^3 P(x^2); otherwise 1 - 2 / (e^(2|x|) + 1) with the sign of x.
  const float a = std::fabs(x);
  const float s = x * x;
  const float p = poly(s, -0.3333333432674408f, 0.13333310186862946f, -0.053960226476192474f, 0.021774930879473686f,
                           -0.008359912782907486f, 0.002307977993041277f);
  const float small = std::copysign(std::fma(x * s, p, x), x);  // keeps tanh(-0) = -0
  const float e = vm::exp(2.0f * a);
  const float large = std::copysign(1.0f - 2.0f / (e + 1.0f), x);
  return a < 0.625f ? small : large;
}

/// erf(x) / x for |x| < 1, as a polynomial in s = x^2.
inline float erf_small(float s) {
  return poly(s, 1.128379225730896f, -0.3761262893676758f, 0.11283612251281738f, -0.026854807510972023f,
              0.0051900530233979225f, -0.000802435155492276f, 7.898201874922961e-05f);
}

inline float erf(float x) {
  // |x| < 1: x P(x^2). Otherwise 1 - erfc(|x|) with erfc(a) = e^(-a^2) Q(1/a) (Q fits erfcx on
  // [1, 4.1]; a^2 is split exactly into hi + lo), and 1 from |x| >= 4 (erfc(4) < 2^-25).
  const float a = std::fabs(x);
  const float s = x * x;
  const float small = x * erf_small(s);
  const float ac = a < 1.0f ? 1.0f : (a > 4.0f ? 4.0f : a);
  const float u = 1.0f / ac;
  const float q = poly(u, 2.197036701545585e-05f, 0.563798189163208f, 0.002330666407942772f, -0.28175947070121765f,
                           -0.08023510128259659f, 0.9229554533958435f, -1.558101773262024f, 1.4571022987365723f,
                           -0.8312594294548035f, 0.2721441090106964f, -0.03941330313682556f);
  const float hi = ac * ac;
  const float lo = std::fma(ac, ac, -hi);
  const float erfc = vm::exp(-hi) * (1.0f - lo) * q;
  const float large = std::copysign(a >= 4.0f ? 1.0f : 1.0f - erfc, x);
  return a < 1.0f ? small : large;
}

/// GELU, x Phi(x), with Phi the standard normal CDF. For |x| / sqrt(2) < 1, Phi = (1 + erf(x / sqrt(2)))
/// / 2 with erf's polynomial above; otherwise Phi = 1 - erfc(a) / 2 (or erfc(a) / 2 for x < 0) with
/// erfc(a), a = |x| / sqrt(2), one polynomial in a on [1, 3.92] (absolute error below 1e-7; past
/// 3.92 erfc < 3e-8 is dropped): no exp and no division, half the work of 1 + erf(x / sqrt(2)).
/// Phi is within 6e-8 of the exact value, as close as 1 + erf(x / sqrt(2)) rounded to float is,
/// so |gelu(x) - x Phi(x)| <= 1.5e-7 |x| with the final product's rounding (1.21e-7 |x| measured by
/// cpp_tests/codegen/vector_math_test.cc).
inline float gelu(float x) {
  const float z = x * 0.70710678118654752440f;
  const float a = std::fabs(z);
  const float small = std::fma(0.5f * z, erf_small(z * z), 0.5f);
  const float ac = a < 1.0f ? 1.0f : (a > 3.92f ? 3.92f : a);
  const float t = std::fma(ac, 0.6849315f, -1.6849315f);  // [1, 3.92] -> [-1, 1]
  const float e = poly(t, 0.000503326883f, -0.00387806492f, 0.0139316022f, -0.0306010973f, 0.0450053737f,
                       -0.0450977907f, 0.0286989734f, -0.00652690465f, -0.00806570984f, 0.00908387918f,
                       -0.00228384067f, -0.00162961299f, 0.000859919412f);
  const float tail = a >= 3.92f ? 0.0f : 0.5f * e;
  const float large = x > 0.0f ? 1.0f - tail : tail;
  return x * (a < 1.0f ? small : large);
}

template <typename T> inline T exp(T x) { return std::exp(x); }
template <typename T> inline T gelu(T x) { return T(0.5) * x * (T(1) + std::erf(T(x * T(0.70710678118654752440)))); }
template <typename T> inline T log(T x) { return std::log(x); }
template <typename T> inline T tanh(T x) { return std::tanh(x); }
template <typename T> inline T erf(T x) { return std::erf(x); }
// rsqrt needs no polynomial: sqrt and divide are packed instructions (1 ulp for float).
template <typename T> inline T rsqrt(T x) { return T(1) / std::sqrt(x); }

}  // namespace vm

struct OpAdd { template <typename T> static T f(T a, T b) { return a + b; } };
struct OpSub { template <typename T> static T f(T a, T b) { return a - b; } };
struct OpMul { template <typename T> static T f(T a, T b) { return a * b; } };
struct OpDiv { template <typename T> static T f(T a, T b) { return a / b; } };
// NaN propagates through maximum/minimum, as in torch. Written as two selects (no ||) so that they
// also apply to vector-extension types, lane by lane.
struct OpMax {
  template <typename T>
  static T f(T a, T b) {
    const T m = a > b ? a : b;
    return a != a ? a : m;
  }
};
struct OpMin {
  template <typename T>
  static T f(T a, T b) {
    const T m = a < b ? a : b;
    return a != a ? a : m;
  }
};
struct OpPow {
  template <typename T>
  static T f(T a, T b) {
    if constexpr (std::is_integral<T>::value) {
      if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b & 1) ? -1 : 1) : 0);
      T r = 1;
      for (; b; b >>= 1, a *= a)
        if (b & 1) r *= a;
      return r;
    } else {
      return std::pow(a, b);
    }
  }
};
struct OpGt { template <typename T> static bool f(T a, T b) { return a > b; } };
struct OpGe { template <typename T> static bool f(T a, T b) { return a >= b; } };
struct OpLt { template <typename T> static bool f(T a, T b) { return a < b; } };
struct OpLe { template <typename T> static bool f(T a, T b) { return a <= b; } };
struct OpEq { template <typename T> static bool f(T a, T b) { return a == b; } };
struct OpNe { template <typename T> static bool f(T a, T b) { return a != b; } };

struct FnExp { template <typename T> static T f(T x) { return vm::exp(x); } };
struct FnNeg { template <typename T> static T f(T x) { return -x; } };
struct FnAbs { template <typename T> static T f(T x) { return x < T(0) ? T(-x) : (x == T(0) ? T(0) : x); } };
struct FnLog { template <typename T> static T f(T x) { return vm::log(x); } };
struct FnSqrt { template <typename T> static T f(T x) { return std::sqrt(x); } };
struct FnRsqrt { template <typename T> static T f(T x) { return vm::rsqrt(x); } };
struct FnRecip { template <typename T> static T f(T x) { return T(1) / x; } };
struct FnRelu { template <typename T> static T f(T x) { return x < T(0) ? T(0) : x; } };
struct FnSigmoid { template <typename T> static T f(T x) { return T(1) / (T(1) + vm::exp(T(-x))); } };
struct FnTanh { template <typename T> static T f(T x) { return vm::tanh(x); } };
struct FnSilu { template <typename T> static T f(T x) { return x / (T(1) + vm::exp(T(-x))); } };
struct FnGelu { template <typename T> static T f(T x) { return vm::gelu(x); } };
struct FnErf { template <typename T> static T f(T x) { return vm::erf(x); } };
struct FnErfc { template <typename T> static T f(T x) { return std::erfc(x); } };
struct FnFloor { template <typename T> static T f(T x) { return std::is_integral<T>::value ? x : T(std::floor(x)); } };
struct FnCeil { template <typename T> static T f(T x) { return std::is_integral<T>::value ? x : T(std::ceil(x)); } };
struct FnRound { template <typename T> static T f(T x) { return std::is_integral<T>::value ? x : T(std::nearbyint(x)); } };
struct FnTrunc { template <typename T> static T f(T x) { return std::is_integral<T>::value ? x : T(std::trunc(x)); } };
struct FnExp2 { template <typename T> static T f(T x) { return std::exp2(x); } };
struct FnExpm1 { template <typename T> static T f(T x) { return std::expm1(x); } };
struct FnNot { template <typename T> static T f(T x) { return x == T(0) ? T(1) : T(0); } };
// torch.sign: NaN and -0.0 give +0.
struct FnSign { template <typename T> static T f(T x) { return x > T(0) ? T(1) : (x < T(0) ? T(-1) : T(0)); } };
struct FnSignbit {
  template <typename T>
  static T f(T x) {
    if constexpr (std::is_floating_point<T>::value) return std::signbit(x) ? T(1) : T(0);
    else if constexpr (std::is_signed<T>::value) return x < T(0) ? T(1) : T(0);
    else return T(0);
  }
};

template <typename Fn, typename T, int64_t N>
inline void tunary(T* __restrict dst, const T* __restrict a) {
  for (int64_t i = 0; i < N; ++i) dst[i] = Fn::f(a[i]);
}

/// Elementwise binary op; `dst` may alias `a` (accumulators), never `b`.
template <typename Op, typename D, typename T, int64_t N>
inline void tbinary(D* dst, const T* a, const T* __restrict b) {
  for (int64_t i = 0; i < N; ++i) dst[i] = D(Op::f(a[i], b[i]));
}

/// dst = a op s (tensor-scalar forms: TADDS, TMULS, ...).
template <typename Op, typename D, typename T, int64_t N>
inline void tbinary_rs(D* __restrict dst, const T* __restrict a, T s) {
  for (int64_t i = 0; i < N; ++i) dst[i] = D(Op::f(a[i], s));
}

/// dst = s op a (scalar on the left).
template <typename Op, typename D, typename T, int64_t N>
inline void tbinary_ls(D* __restrict dst, T s, const T* __restrict a) {
  for (int64_t i = 0; i < N; ++i) dst[i] = D(Op::f(s, a[i]));
}

/// dst[r, c] = a[r, c] op b[r]   (TROWEXPAND*)
template <typename Op, typename T, int64_t R, int64_t C>
inline void trowexpand(T* __restrict dst, const T* __restrict a, const T* __restrict b) {
  for (int64_t r = 0; r < R; ++r) {
    const T br = b[r];
    for (int64_t c = 0; c < C; ++c) dst[r * C + c] = Op::f(a[r * C + c], br);
  }
}

/// dst[r, c] = a[r, c] op b[c]   (TCOLEXPAND*)
template <typename Op, typename T, int64_t R, int64_t C>
inline void tcolexpand(T* __restrict dst, const T* __restrict a, const T* __restrict b) {
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) dst[r * C + c] = Op::f(a[r * C + c], b[c]);
}

/// TSELECT: dst = cond ? a : b (constants in the forms below).
template <typename T, int64_t N>
inline void tselect(T* __restrict dst, const int32_t* __restrict c, const T* __restrict a, const T* __restrict b) {
  for (int64_t i = 0; i < N; ++i) dst[i] = c[i] ? a[i] : b[i];
}
template <typename T, int64_t N>
inline void tselect_a(T* __restrict dst, const int32_t* __restrict c, T a, const T* __restrict b) {
  for (int64_t i = 0; i < N; ++i) dst[i] = c[i] ? a : b[i];
}
template <typename T, int64_t N>
inline void tselect_b(T* __restrict dst, const int32_t* __restrict c, const T* __restrict a, T b) {
  for (int64_t i = 0; i < N; ++i) dst[i] = c[i] ? a[i] : b;
}

/// TCAST: converts through the destination's storage type S, so the value
/// is exactly what storing and reloading it would give.
template <typename S, typename D, typename T, int64_t N>
inline void tcast(D* __restrict dst, const T* __restrict src) {
  for (int64_t i = 0; i < N; ++i) dst[i] = cvt<D>(cvt<S>(src[i]));
}

/// Floats in a native SIMD vector (bytes / 4).
#if defined(__AVX512F__)
constexpr int64_t kVecFloats = 16;
#elif defined(__AVX__)
constexpr int64_t kVecFloats = 8;
#else
constexpr int64_t kVecFloats = 4;
#endif

/// Reduces axis RED of a tile viewed as [OUTER, RED, INNER] over its first
/// `valid` entries (TROW*: INNER = 1; TCOL*: OUTER = 1; TRED*: a middle axis).
/// A row (INNER = 1) is reduced in kReduceLanes interleaved partial results,
/// combined at the end, so the loop vectorises; other layouts reduce whole
/// rows of INNER elements at a time.
constexpr int64_t kReduceLanes = 16;
/// Independent sets of kReduceLanes partial results a vectorised row reduction keeps.
constexpr int64_t kReduceSets = 4;

template <typename Op, typename T, int64_t OUTER, int64_t RED, int64_t INNER>
inline void treduce(T* __restrict dst, const T* __restrict a, int64_t valid, T init) {
  if (valid > RED) valid = RED;
  if (valid < 0) valid = 0;
  if constexpr (INNER == 1) {
    const int64_t chunks = valid / kReduceLanes;
    for (int64_t o = 0; o < OUTER; ++o) {
      const T* __restrict row = a + o * RED;
      T lanes[kReduceLanes];
      if constexpr (std::is_same<T, float>::value || std::is_same<T, double>::value ||
                    std::is_same<T, int32_t>::value || std::is_same<T, int64_t>::value) {
        // The lanes as native vector-extension values (kReduceLanes elements in all): compilers
        // keep them in SIMD registers, where a plain array of lanes is often reduced with scalar
        // instructions.
        constexpr int64_t kPer = kVecFloats * 4 / static_cast<int64_t>(sizeof(T));
        constexpr int64_t kVecs = kReduceLanes / kPer;
        typedef T Vec __attribute__((vector_size(kPer * sizeof(T))));
        // kReduceSets independent sets of partial results, so that the loop is not bound by the
        // latency of one chain of Op (a NaN-propagating max is three dependent instructions).
        Vec acc[kReduceSets][kVecs];
        for (int64_t s = 0; s < kReduceSets; ++s)
          for (int64_t v = 0; v < kVecs; ++v)
            for (int64_t l = 0; l < kPer; ++l) acc[s][v][l] = init;
        const int64_t whole = chunks / kReduceSets * kReduceSets;
        for (int64_t c = 0; c < whole; c += kReduceSets) {
          for (int64_t s = 0; s < kReduceSets; ++s) {
            for (int64_t v = 0; v < kVecs; ++v) {
              Vec x;
              memcpy(&x, row + (c + s) * kReduceLanes + v * kPer, sizeof x);
              acc[s][v] = Op::f(acc[s][v], x);
            }
          }
        }
        for (int64_t c = whole; c < chunks; ++c) {
          for (int64_t v = 0; v < kVecs; ++v) {
            Vec x;
            memcpy(&x, row + c * kReduceLanes + v * kPer, sizeof x);
            acc[0][v] = Op::f(acc[0][v], x);
          }
        }
        for (int64_t s = 1; s < kReduceSets; ++s)
          for (int64_t v = 0; v < kVecs; ++v) acc[0][v] = Op::f(acc[0][v], acc[s][v]);
        memcpy(lanes, acc[0], sizeof acc[0]);
      } else {
        for (int64_t l = 0; l < kReduceLanes; ++l) lanes[l] = init;
        for (int64_t c = 0; c < chunks; ++c)
          for (int64_t l = 0; l < kReduceLanes; ++l) lanes[l] = Op::f(lanes[l], row[c * kReduceLanes + l]);
      }
      for (int64_t w = kReduceLanes / 2; w >= 1; w /= 2)
        for (int64_t l = 0; l < w; ++l) lanes[l] = Op::f(lanes[l], lanes[l + w]);
      T r = lanes[0];
      for (int64_t c = chunks * kReduceLanes; c < valid; ++c) r = Op::f(r, row[c]);
      dst[o] = r;
    }
    return;
  }
  for (int64_t o = 0; o < OUTER; ++o) {
    T* __restrict d = dst + o * INNER;
    for (int64_t i = 0; i < INNER; ++i) d[i] = init;
    for (int64_t r = 0; r < valid; ++r) {
      const T* __restrict row = a + (o * RED + r) * INNER;
      for (int64_t i = 0; i < INNER; ++i) d[i] = Op::f(d[i], row[i]);
    }
  }
}

/// Native SIMD vectors of floats for the matmul micro-kernel (GCC/Clang vector extensions).
typedef float vfloat __attribute__((vector_size(kVecFloats * sizeof(float))));

inline vfloat vload(const float* p) {
  vfloat v;
  memcpy(&v, p, sizeof v);
  return v;
}
inline void vstore(float* p, vfloat v) { memcpy(p, &v, sizeof v); }

/// Register block of the float matmul: kMatmulRows rows x kMatmulVecs vectors of accumulators
/// (8 x 2 = 16 vector registers), each step loading kMatmulVecs vectors of b and broadcasting
/// kMatmulRows elements of a.
constexpr int64_t kMatmulRows = 8;
constexpr int64_t kMatmulVecs = 2;
constexpr int64_t kMatmulCols = kMatmulVecs * kVecFloats;

/// The micro-kernel: d (MR x NV vectors, row stride N) = or += a (MR rows, row stride KA) @ b (K rows, row stride N).
template <int64_t MR, int64_t NV, bool ACC, int64_t K, int64_t N, int64_t KA>
inline void matmul_block(float* __restrict d, const float* __restrict a, const float* __restrict b) {
  vfloat acc[MR][NV];
  for (int64_t i = 0; i < MR; ++i)
    for (int64_t v = 0; v < NV; ++v) acc[i][v] = ACC ? vload(d + i * N + v * kVecFloats) : vfloat{};
  for (int64_t k = 0; k < K; ++k) {
    vfloat bv[NV];
    for (int64_t v = 0; v < NV; ++v) bv[v] = vload(b + k * N + v * kVecFloats);
    for (int64_t i = 0; i < MR; ++i) {
      const float av = a[i * KA + k];
      for (int64_t v = 0; v < NV; ++v) acc[i][v] += av * bv[v];
    }
  }
  for (int64_t i = 0; i < MR; ++i)
    for (int64_t v = 0; v < NV; ++v) vstore(d + i * N + v * kVecFloats, acc[i][v]);
}

/// Rows [0, M) of one column block of NV vectors (row strides: KA in a, NS in b and d), in
/// register blocks of kMatmulRows rows (the last block takes the remaining rows).
template <int64_t NV, bool ACC, int64_t M, int64_t K, int64_t NS, int64_t KA>
inline void matmul_column_block(float* __restrict d, const float* __restrict a, const float* __restrict b) {
  constexpr int64_t full = M / kMatmulRows * kMatmulRows;
  for (int64_t i0 = 0; i0 < full; i0 += kMatmulRows)
    matmul_block<kMatmulRows, NV, ACC, K, NS, KA>(d + i0 * NS, a + i0 * KA, b);
  if constexpr (M % kMatmulRows != 0) matmul_block<M % kMatmulRows, NV, ACC, K, NS, KA>(d + full * NS, a + full * KA, b);
}

/// d (M x N, row stride NS) = or += a (M x K, row stride KA) @ b (K x N, row stride NS) for any
/// T: floats through the register-blocked micro-kernel over column blocks of kMatmulCols (then
/// single vectors), the columns left over and other types through the i-k-j loop, which streams
/// rows of b so its inner loop vectorises.
template <bool ACC, typename T, int64_t M, int64_t K, int64_t N, int64_t KA, int64_t NS>
inline void matmul_tile(T* __restrict d, const T* __restrict a, const T* __restrict b) {
  int64_t j0 = 0;
  if constexpr (std::is_same<T, float>::value) {
    for (; j0 + kMatmulCols <= N; j0 += kMatmulCols)
      matmul_column_block<kMatmulVecs, ACC, M, K, NS, KA>(d + j0, a, b + j0);
    for (; j0 + kVecFloats <= N; j0 += kVecFloats) matmul_column_block<1, ACC, M, K, NS, KA>(d + j0, a, b + j0);
  }
  if (j0 == N) return;
  for (int64_t i = 0; i < M; ++i) {
    T* __restrict drow = d + i * NS;
    if (!ACC)
      for (int64_t j = j0; j < N; ++j) drow[j] = T(0);
    for (int64_t k = 0; k < K; ++k) {
      const T av = a[i * KA + k];
      const T* __restrict brow = b + k * NS;
      for (int64_t j = j0; j < N; ++j) drow[j] += av * brow[j];
    }
  }
}

/// TMATMUL / TMATMUL_ACC: dst (M x N) = or += a (M x K) @ b (K x N). The tile is the L1 cube tile;
/// (M0, K0, N0), the L0 cube tile, divides it into blocks multiplied one at a time (k blocks
/// outermost, so a K0 x N0 panel of b and an M0 x K0 panel of a stay in the core's first-level
/// cache while a block runs); inside a block the micro-kernel's register block is sized by the
/// vector register file.
template <bool ACC, typename T, int64_t M, int64_t K, int64_t N, int64_t M0 = M, int64_t K0 = K, int64_t N0 = N>
inline void tmatmul(T* __restrict dst, const T* __restrict a, const T* __restrict b) {
  static_assert(M % M0 == 0 && K % K0 == 0 && N % N0 == 0, "the L0 cube tile must divide the tile");
  if constexpr (M0 == M && K0 == K && N0 == N) {
    matmul_tile<ACC, T, M, K, N, K, N>(dst, a, b);
  } else {
    for (int64_t k0 = 0; k0 < K; k0 += K0)
      for (int64_t j0 = 0; j0 < N; j0 += N0)
        for (int64_t i0 = 0; i0 < M; i0 += M0) {
          T* d = dst + i0 * N + j0;
          const T* ab = a + i0 * K + k0;
          const T* bb = b + k0 * N + j0;
          if (k0 == 0) matmul_tile<ACC, T, M0, K0, N0, K, N>(d, ab, bb);
          else matmul_tile<true, T, M0, K0, N0, K, N>(d, ab, bb);
        }
  }
}

/// Walks the valid part of a tile of shape `tshape`: calls f(flat tile index,
/// element offset of the box position with the `axis` coordinate left out).
template <typename F>
inline void for_each_valid(int rank, const int64_t* tshape, const int64_t* valid, const int64_t* stride, int axis, F f) {
  int64_t total = 1;
  for (int d = 0; d < rank; ++d) total *= tshape[d];
  for (int64_t i = 0; i < total; ++i) {
    int64_t rem = i, off = 0;
    bool inside = true;
    for (int d = rank - 1; d >= 0; --d) {
      int64_t c = rem % tshape[d];
      rem /= tshape[d];
      inside = inside && c < valid[d];
      if (d != axis) off += c * stride[d];
    }
    if (inside) f(i, off);
  }
}

/// Kernel: an index `k` of a gather or scatter (`where`) outside [0, extent) on `axis`.
[[gnu::cold, gnu::noinline]] inline int32_t index_error(const char* where, int64_t k, int axis, int64_t extent) {
  char text[512];
  snprintf(text, sizeof text, "%s: index %lld on axis %d is outside [0, %lld)", where, static_cast<long long>(k), axis,
           static_cast<long long>(extent));
  return kernel_error(PYPTO_STATUS_INDEX, text);
}

/// Walks the valid part of an index tile: calls f(flat tile index, element offset of the indexed
/// position) for each index inside [0, extent); 0, or PYPTO_STATUS_INDEX naming the first index
/// outside it (no element is moved for that one).
template <typename I, typename F>
inline int32_t for_each_indexed(int rank, const int64_t* tshape, const int64_t* valid, const int64_t* stride,
                                const I* __restrict idx, int axis, int64_t extent, const char* where, F f) {
  bool ok = true;
  int64_t bad = 0;
  for_each_valid(rank, tshape, valid, stride, axis, [&](int64_t i, int64_t off) {
    int64_t k = static_cast<int64_t>(idx[i]);
    if (k < 0 || k >= extent) {
      if (ok) bad = k;
      ok = false;
    } else {
      f(i, off + k * stride[axis]);
    }
  });
  return ok ? 0 : index_error(where, bad, axis, extent);
}

/// TGATHER: dst[i] = src[box position of i, with idx[i] on `axis`].
template <typename T, typename S, typename I>
inline int32_t tgather(T* __restrict dst, int rank, const int64_t* tshape, const int64_t* valid, const S* __restrict src,
                       const int64_t* stride, const I* __restrict idx, int axis, int64_t extent, const char* where) {
  return for_each_indexed(rank, tshape, valid, stride, idx, axis, extent, where,
                          [&](int64_t i, int64_t at) { dst[i] = cvt<T>(src[at]); });
}

/// TSCATTER: dst[box position of i, with idx[i] on `axis`] = val[i].
template <typename T, typename S, typename I>
inline int32_t tscatter(S* __restrict dst, const int64_t* stride, const int64_t* valid, int rank, const int64_t* tshape,
                        const I* __restrict idx, const T* __restrict val, int axis, int64_t extent, const char* where) {
  return for_each_indexed(rank, tshape, valid, stride, idx, axis, extent, where,
                          [&](int64_t i, int64_t at) { dst[at] = cvt<S>(val[i]); });
}

/// TEXPAND: broadcasts `src` (shape `sshape`, size-1 dims stretch) to `dshape`.
template <typename T>
inline void texpand(T* __restrict dst, int rank, const int64_t* dshape, const T* __restrict src, const int64_t* sshape) {
  int64_t sstride[PYPTO_MAX_DIMS];
  int64_t n = 1, total = 1;
  for (int d = rank - 1; d >= 0; --d) {
    sstride[d] = sshape[d] == 1 ? 0 : n;
    n *= sshape[d];
    total *= dshape[d];
  }
  for (int64_t i = 0; i < total; ++i) {
    int64_t rem = i, off = 0;
    for (int d = rank - 1; d >= 0; --d) {
      off += (rem % dshape[d]) * sstride[d];
      rem /= dshape[d];
    }
    dst[i] = src[off];
  }
}

}  // namespace pto

#endif  // PYPTO_TILE_OPS_H_
