// PTO tile instructions for the CPU backend.
//
// Generated InCore kernels call these templates; codegen pastes this header
// (after pypto_abi.h) into every generated source file. Tiles are row-major
// arrays of compile-time size, 64-byte aligned, with no aliasing between
// operands except where an instruction says so (an accumulator may be both
// destination and first source), so loops over them vectorise.
#ifndef PYPTO_TILE_OPS_H_
#define PYPTO_TILE_OPS_H_

#include <math.h>
#include <stdint.h>
#include <string.h>

namespace pto {

inline int64_t floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
inline int64_t floormod(int64_t a, int64_t b) { return a - floordiv(a, b) * b; }
inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }

/// Element pointer of a region's origin.
template <typename T>
inline T* region_data(const pypto_region& r) {
  int64_t off = 0;
  for (int d = 0; d < r.ndim; ++d) off += r.offset[d] * r.stride[d];
  return static_cast<T*>(r.base) + off;
}

/// A region of a whole tensor: `off`/`ext` give the box.
inline pypto_region make_region(const pypto_tensor& t, const int64_t* off, const int64_t* ext) {
  pypto_region r;
  r.base = t.data;
  r.ndim = t.ndim;
  r.elem_size = t.elem_size;
  for (int d = 0; d < PYPTO_MAX_DIMS; ++d) {
    r.offset[d] = d < t.ndim ? off[d] : 0;
    r.extent[d] = d < t.ndim ? ext[d] : 1;
    r.stride[d] = d < t.ndim ? t.stride[d] : 0;
  }
  return r;
}

/// A zeroed, contiguous global workspace tensor for the current run.
inline pypto_tensor make_workspace(const pypto_runtime_api* api, int32_t ndim, const int64_t* shape, int32_t elem_size) {
  pypto_tensor t;
  t.ndim = ndim;
  t.elem_size = elem_size;
  int64_t n = 1;
  for (int d = ndim - 1; d >= 0; --d) {
    t.shape[d] = shape[d];
    t.stride[d] = n;
    n *= shape[d];
  }
  t.data = api->alloc_workspace(api->rt, n * elem_size);
  return t;
}

/// TLOAD: the box of `rank` dims at `src` (element strides `stride`, `valid`
/// elements per dim) into a tile of shape `tshape` whose last dim is C; tile
/// elements outside the valid box are zero.
template <typename T, int64_t C>
inline void tload(T* __restrict dst, int rank, const int64_t* tshape, const T* __restrict src, const int64_t* stride,
                  const int64_t* valid) {
  int64_t rows = 1;
  for (int d = 0; d < rank - 1; ++d) rows *= tshape[d];
  const int64_t vc = valid[rank - 1] < C ? valid[rank - 1] : C;
  const int64_t sc = stride[rank - 1];
  for (int64_t r = 0; r < rows; ++r) {
    int64_t off = 0, rem = r;
    bool inside = true;
    for (int d = rank - 2; d >= 0; --d) {
      int64_t i = rem % tshape[d];
      rem /= tshape[d];
      inside = inside && i < valid[d];
      off += i * stride[d];
    }
    T* __restrict drow = dst + r * C;
    if (!inside) {
      for (int64_t c = 0; c < C; ++c) drow[c] = T(0);
      continue;
    }
    const T* __restrict srow = src + off;
    if (sc == 1 && vc == C) {
      for (int64_t c = 0; c < C; ++c) drow[c] = srow[c];
    } else {
      for (int64_t c = 0; c < vc; ++c) drow[c] = srow[c * sc];
      for (int64_t c = vc; c < C; ++c) drow[c] = T(0);
    }
  }
}

/// TSTORE: the valid part of a tile (last dim C) into a strided box.
template <typename T, int64_t C>
inline void tstore(T* __restrict dst, const int64_t* stride, const int64_t* valid, int rank, const int64_t* tshape,
                   const T* __restrict src) {
  int64_t rows = 1;
  for (int d = 0; d < rank - 1; ++d) rows *= tshape[d];
  const int64_t vc = valid[rank - 1] < C ? valid[rank - 1] : C;
  const int64_t sc = stride[rank - 1];
  for (int64_t r = 0; r < rows; ++r) {
    int64_t off = 0, rem = r;
    bool inside = true;
    for (int d = rank - 2; d >= 0; --d) {
      int64_t i = rem % tshape[d];
      rem /= tshape[d];
      inside = inside && i < valid[d];
      off += i * stride[d];
    }
    if (!inside) continue;
    const T* __restrict srow = src + r * C;
    T* __restrict drow = dst + off;
    if (sc == 1) {
      for (int64_t c = 0; c < vc; ++c) drow[c] = srow[c];
    } else {
      for (int64_t c = 0; c < vc; ++c) drow[c * sc] = srow[c];
    }
  }
}

template <typename T, int64_t N>
inline void tfill(T* __restrict dst, T value) {
  for (int64_t i = 0; i < N; ++i) dst[i] = value;
}

template <typename T, int64_t N>
inline void tcopy(T* __restrict dst, const T* __restrict src) {
  for (int64_t i = 0; i < N; ++i) dst[i] = src[i];
}

struct OpAdd { template <typename T> static T f(T a, T b) { return a + b; } };
struct OpSub { template <typename T> static T f(T a, T b) { return a - b; } };
struct OpMul { template <typename T> static T f(T a, T b) { return a * b; } };
struct OpDiv { template <typename T> static T f(T a, T b) { return a / b; } };
struct OpMax { template <typename T> static T f(T a, T b) { return a > b ? a : b; } };

/// Elementwise binary op; `dst` may alias `a` (accumulators), never `b`.
template <typename Op, typename T, int64_t N>
inline void tbinary(T* dst, const T* a, const T* __restrict b) {
  for (int64_t i = 0; i < N; ++i) dst[i] = Op::f(a[i], b[i]);
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

template <typename T, int64_t N>
inline void texp(T* __restrict dst, const T* __restrict a) {
  for (int64_t i = 0; i < N; ++i) dst[i] = expf(a[i]);
}

/// Reduces each row over its first `vc` columns (TROWSUM / TROWMAX).
template <typename Op, typename T, int64_t R, int64_t C>
inline void trowreduce(T* __restrict dst, const T* __restrict a, int64_t vc, T init) {
  if (vc > C) vc = C;
  for (int64_t r = 0; r < R; ++r) {
    T acc = init;
    for (int64_t c = 0; c < vc; ++c) acc = Op::f(acc, a[r * C + c]);
    dst[r] = acc;
  }
}

/// Reduces each column over its first `vr` rows (TCOLSUM / TCOLMAX).
template <typename Op, typename T, int64_t R, int64_t C>
inline void tcolreduce(T* __restrict dst, const T* __restrict a, int64_t vr, T init) {
  if (vr > R) vr = R;
  for (int64_t c = 0; c < C; ++c) dst[c] = init;
  for (int64_t r = 0; r < vr; ++r)
    for (int64_t c = 0; c < C; ++c) dst[c] = Op::f(dst[c], a[r * C + c]);
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
