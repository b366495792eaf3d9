// TGATHER, TSCATTER and TEXPAND.
// Part of codegen/tile_ops.h, which includes the parts in order (and nothing else does).

namespace pto {

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

/// TSCATTER: dst[box position of i, with idx[i] on `axis`] = val[i] (REDUCE 0), or the value there
/// plus (1) or times (2) val[i], computed in the tile's type. Elements are visited in order, so
/// duplicate indices accumulate deterministically.
template <int REDUCE, typename T, typename S, typename I>
inline int32_t tscatter(S* __restrict dst, const int64_t* stride, const int64_t* valid, int rank, const int64_t* tshape,
                        const I* __restrict idx, const T* __restrict val, int axis, int64_t extent, const char* where) {
  return for_each_indexed(rank, tshape, valid, stride, idx, axis, extent, where, [&](int64_t i, int64_t at) {
    if constexpr (REDUCE == 1) dst[at] = cvt<S>(static_cast<T>(cvt<T>(dst[at]) + val[i]));
    else if constexpr (REDUCE == 2) dst[at] = cvt<S>(static_cast<T>(cvt<T>(dst[at]) * val[i]));
    else dst[at] = cvt<S>(val[i]);
  });
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
