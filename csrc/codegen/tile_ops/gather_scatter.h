// TGATHER, TSCATTER and TEXPAND.
// Part of codegen/tile_ops.h, which includes the parts in order (and nothing else does).

namespace pto {

/// Kernel: an index `k` of a gather or scatter (`where`) outside [0, extent) on `axis`.
[[gnu::cold, gnu::noinline]] inline int32_t index_error(const char* where, int64_t k, int axis, int64_t extent) {
  char text[512];
  snprintf(text, sizeof text, "%s: index %lld on axis %d is outside [0, %lld)", where, static_cast<long long>(k), axis,
           static_cast<long long>(extent));
  return kernel_error(PYPTO_STATUS_INDEX, text);
}

/// Walks the valid part of a tile of shape `tshape` a row (the last tile dim) at a time, with the
/// index tile `idx`: of that shape, or (idx_cols 1) of one index per row. For each index inside
/// [0, extent): `elem(flat tile index, element offset of the indexed position)`; where a whole row
/// holds one index and `axis` is not the last dim (index_select, index_add, embedding rows), one
/// `run(flat tile index of the row, element offset of its first position, length)` instead, over
/// positions `stride[rank - 1]` apart. Returns 0, or PYPTO_STATUS_INDEX naming the first index
/// outside [0, extent) (nothing is moved for that one). A window (a destination-blocked scatter):
/// index k lands at position k - base of the box on `axis`, and only where that lies in [0, len);
/// the other indices in [0, extent) are skipped. Without one, base is 0 and len is extent.
template <typename I, typename E, typename R>
inline int32_t for_each_indexed(int rank, const int64_t* tshape, const int64_t* valid, const int64_t* stride,
                                const I* __restrict idx, int64_t idx_cols, int axis, int64_t extent, int64_t base,
                                int64_t len, const char* where, E elem, R run) {
  const int last = rank - 1;
  for (int d = 0; d < rank; ++d)
    if (valid[d] <= 0) return 0;
  const int64_t n = valid[last], sl = stride[last];
  bool ok = true;
  int64_t bad = 0;
  // Index k: reported outside [0, extent); otherwise its position in the window, or -1 where it
  // lands in another window.
  auto place = [&](int64_t k) -> int64_t {
    if (k < 0 || k >= extent) {
      if (ok) bad = k;
      ok = false;
      return -1;
    }
    return static_cast<uint64_t>(k - base) < static_cast<uint64_t>(len) ? k - base : -1;
  };
  if (rank == 2 && idx_cols == 1 && axis == 0) {  // rows of a matrix, one index each (index_add's)
    for (int64_t r = 0; r < valid[0]; ++r)
      if (const int64_t p = place(static_cast<int64_t>(idx[r])); p >= 0) run(r * tshape[1], p * stride[0], n);
    return ok ? 0 : index_error(where, bad, axis, extent);
  }
  int64_t coord[PYPTO_MAX_DIMS] = {};
  const int64_t ic = idx_cols == 1 ? 0 : 1;  // index step along a row
  for (;;) {
    int64_t rowno = 0, off = 0;  // the row's number in the tile; its element offset
    for (int d = 0; d < last; ++d) {
      rowno = rowno * tshape[d] + coord[d];
      if (d != axis) off += coord[d] * stride[d];
    }
    const int64_t row = rowno * tshape[last];  // flat tile index of the row's first element
    const I* r = idx + rowno * idx_cols;
    bool uniform = axis != last;
    for (int64_t c = 1; c < n && uniform && ic; ++c) uniform = r[c] == r[0];
    if (uniform) {
      if (const int64_t p = place(static_cast<int64_t>(r[0])); p >= 0) run(row, off + p * stride[axis], n);
    } else {
      for (int64_t c = 0; c < n; ++c)
        if (const int64_t p = place(static_cast<int64_t>(r[c * ic])); p >= 0)
          elem(row + c, off + (axis == last ? 0 : c * sl) + p * stride[axis]);
    }
    int d = last - 1;  // the next row: an odometer over the valid part of the leading dims
    for (; d >= 0; --d) {
      if (++coord[d] < valid[d]) break;
      coord[d] = 0;
    }
    if (d < 0) break;
  }
  return ok ? 0 : index_error(where, bad, axis, extent);
}

/// TGATHER: dst[i] = src[box position of i, with idx[i] on `axis`] (idx_cols 1: the row's one index).
template <typename T, typename S, typename I>
inline int32_t tgather(T* __restrict dst, int rank, const int64_t* tshape, const int64_t* valid, const S* __restrict src,
                       const int64_t* stride, const I* __restrict idx, int64_t idx_cols, int axis, int64_t extent,
                       const char* where) {
  const int64_t sl = stride[rank - 1];
  return for_each_indexed(
      rank, tshape, valid, stride, idx, idx_cols, axis, extent, 0, extent, where,
      [&](int64_t i, int64_t at) { dst[i] = cvt<T>(src[at]); },
      [&](int64_t i, int64_t at, int64_t n) {
        T* __restrict d = dst + i;
        const S* __restrict s = src + at;
        if (sl == 1) {
          for (int64_t c = 0; c < n; ++c) d[c] = cvt<T>(s[c]);
        } else {
          for (int64_t c = 0; c < n; ++c) d[c] = cvt<T>(s[c * sl]);
        }
      });
}

/// One TSCATTER element: `to` = val (REDUCE 0), or to plus (1) or times (2) val, computed in T.
template <int REDUCE, typename T, typename S>
inline void scatter_one(S& to, T val) {
  if constexpr (REDUCE == 1) to = cvt<S>(static_cast<T>(cvt<T>(to) + val));
  else if constexpr (REDUCE == 2) to = cvt<S>(static_cast<T>(cvt<T>(to) * val));
  else to = cvt<S>(val);
}

/// TSCATTER: dst[box position of i, with idx[i] on `axis`] = val[i] (REDUCE 0), or the value there
/// plus (1) or times (2) val[i], computed in the tile's type. Rows are visited in order and a row's
/// elements in order, so duplicate indices accumulate deterministically (in index order). With a
/// window (base, len; see for_each_indexed) only the indices in [base, base + len) land.
template <int REDUCE, typename T, typename S, typename I>
inline int32_t tscatter(S* __restrict dst, const int64_t* stride, const int64_t* valid, int rank, const int64_t* tshape,
                        const I* __restrict idx, int64_t idx_cols, const T* __restrict val, int axis, int64_t extent,
                        int64_t base, int64_t len, const char* where) {
  const int64_t sl = stride[rank - 1];
  auto add_row = [&](int64_t i, int64_t at, int64_t n) {
    S* __restrict d = dst + at;
    const T* __restrict v = val + i;
    if (sl == 1) {
      for (int64_t c = 0; c < n; ++c) scatter_one<REDUCE>(d[c], v[c]);
    } else {
      for (int64_t c = 0; c < n; ++c) scatter_one<REDUCE>(d[c * sl], v[c]);
    }
  };
  // Whole rows: their values are fetched ahead (the rows a window takes are scattered through the
  // source, so the hardware prefetcher cannot see one coming and would ramp up on each), then added.
  return for_each_indexed(
      rank, tshape, valid, stride, idx, idx_cols, axis, extent, base, len, where,
      [&](int64_t i, int64_t at) { scatter_one<REDUCE>(dst[at], val[i]); },
      [&](int64_t i, int64_t at, int64_t n) {
        const char* row = reinterpret_cast<const char*>(val + i);
        const int64_t bytes = n * static_cast<int64_t>(sizeof(T));
        for (int64_t b = 0; b < bytes; b += 64) __builtin_prefetch(row + b);
        add_row(i, at, n);
      });
}

/// TEXPAND: broadcasts `src` (shape `sshape`, size-1 dims stretch) to `dshape`. The dims are first
/// merged into as few runs as the layout allows (neighbours that are both stretched, or both
/// copied and contiguous), then each row of the innermost run is one fill or one copy, its source
/// found by RowWalk: no division per element.
template <typename T>
inline void texpand(T* __restrict dst, int rank, const int64_t* dshape, const T* __restrict src, const int64_t* sshape) {
  int64_t ext[PYPTO_MAX_DIMS], sst[PYPTO_MAX_DIMS];  // merged dims, innermost first: extent, source stride
  int m = 0;
  int64_t n = 1;
  for (int d = rank - 1; d >= 0; --d) {
    if (dshape[d] <= 0) return;  // an empty tile
    const int64_t s = sshape[d] == 1 ? 0 : n;
    n *= sshape[d];
    if (dshape[d] == 1) continue;  // a dim of one moves nothing
    if (m > 0 && ((s == 0 && sst[m - 1] == 0) || (s != 0 && s == sst[m - 1] * ext[m - 1]))) {
      ext[m - 1] *= dshape[d];
      continue;
    }
    ext[m] = dshape[d];
    sst[m] = s;
    ++m;
  }
  if (m == 0) {
    dst[0] = src[0];
    return;
  }
  // The runs outermost first, as RowWalk takes them; every row is inside (valid = shape).
  int64_t shape[PYPTO_MAX_DIMS], stride[PYPTO_MAX_DIMS];
  int64_t rows = 1;
  for (int k = 0; k < m; ++k) {
    shape[k] = ext[m - 1 - k];
    stride[k] = sst[m - 1 - k];
    rows *= k < m - 1 ? shape[k] : 1;
  }
  const int64_t inner = ext[0];
  RowWalk walk(m, shape, shape, stride);
  for (int64_t r = 0; r < rows; ++r, walk.next()) {
    T* __restrict drow = dst + r * inner;
    const T* __restrict srow = src + walk.offset();
    if (sst[0] == 0) {
      const T v = *srow;
      for (int64_t c = 0; c < inner; ++c) drow[c] = v;
    } else {
      memcpy(drow, srow, sizeof(T) * static_cast<size_t>(inner));
    }
  }
}

}  // namespace pto
