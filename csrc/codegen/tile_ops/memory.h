// Moving tiles: TLOAD, TSTORE (with streaming stores), TFILL, TARANGE and tile copies.
// Part of codegen/tile_ops.h, which includes the parts in order (and nothing else does).

namespace pto {

/// The rows of a tile of shape `tshape` in order (rows = all dims but the last): each one's element
/// offset in a box with strides `stride`, and whether it lies inside the `valid` box. Both are
/// carried from one row to the next: a division per dim and row (of a rank-3 or rank-4 tile, whose
/// shape the copy loop does not know at compile time) cost more than copying a row of 64 floats.
class RowWalk {
 public:
  RowWalk(int rank, const int64_t* tshape, const int64_t* valid, const int64_t* stride)
      : outer_(rank - 1), tshape_(tshape), valid_(valid), stride_(stride) {
    for (int d = 0; d < outer_; ++d) {
      idx_[d] = 0;
      outside_ += valid[d] <= 0;
    }
  }
  int64_t offset() const { return off_; }
  bool inside() const { return outside_ == 0; }
  /// Moves to the next row (the innermost outer dim first, carrying into the ones outside it).
  void next() {
    for (int d = outer_ - 1; d >= 0; --d) {
      const bool was = idx_[d] < valid_[d];
      off_ += stride_[d];
      if (++idx_[d] < tshape_[d]) {
        outside_ += was && idx_[d] >= valid_[d];
        return;
      }
      off_ -= stride_[d] * tshape_[d];
      idx_[d] = 0;
      outside_ += static_cast<int>(valid_[d] <= 0) - static_cast<int>(!was);
    }
  }

 private:
  int outer_;
  const int64_t* tshape_;
  const int64_t* valid_;
  const int64_t* stride_;
  int64_t idx_[PYPTO_MAX_DIMS > 1 ? PYPTO_MAX_DIMS : 1];
  int64_t off_ = 0;
  int outside_ = 0;
};

/// TLOAD: the box of `rank` dims at `src` (element strides `stride`, `valid`
/// elements per dim) into a tile of shape `tshape` whose last dim is C; tile
/// elements outside the valid box are zero.
/// A copy whose rows lie apart in memory (a tile of a wider tensor) misses the cache one line at a
/// time: each row is a short stream in its own page, out of reach of the hardware prefetchers, so
/// a copy without help waits out one miss after another. Rows are prefetched kPrefetchRows ahead,
/// so the misses of several rows overlap (an L3-resident 128 x 128 float tile of a 1024-wide
/// matrix: 4 GB/s without, 20 GB/s with, on a Zen 3 core). Portable: a compiler builtin that is a
/// no-op where the target has no prefetch instruction.
constexpr int64_t kPrefetchRows = 8;

template <int RW, typename S>
inline void prefetch_span(const S* p, int64_t n) {
  const char* c = reinterpret_cast<const char*>(p);
  for (int64_t b = 0; b < n * static_cast<int64_t>(sizeof(S)); b += 64) __builtin_prefetch(c + b, RW);
}

/// Prefetches row r + kPrefetchRows of a copy of a rank-2 tile (row i at base + i * stride[0]) for
/// reading (RW 0) or writing (RW 1) when the rows have gaps between them (`gaps`) and that row is
/// inside the tile and its valid rows. Tiles of other ranks are not prefetched.
template <int RW, typename S>
inline void prefetch_ahead(bool gaps, int rank, const int64_t* valid, const int64_t* stride, int64_t r, int64_t rows,
                           const S* base, int64_t n) {
  const int64_t ahead = r + kPrefetchRows;
  if (!gaps || rank != 2 || ahead >= rows || ahead >= valid[0]) return;
  prefetch_span<RW>(base + ahead * stride[0], n);
}

/// TLOAD of a transposed box: a rank-2 tile whose rows are contiguous along the tile's first dim
/// (element (r, c) at src[r + c * sc]: a transposed view of a row-major matrix, such as the weight
/// of a linear layer read as b^T). Element by element along the tile's rows, each load would touch
/// a new source row, a new cache line and often a new page; copied in blocks of kTransposeBlock x
/// kTransposeBlock, each block reads kTransposeBlock lines of kTransposeBlock source rows and
/// writes as many lines of the tile.
constexpr int64_t kTransposeBlock = 16;

#if defined(PTO_HAS_SHUFFLE)
/// A square block of floats transposed in registers: kTransposeLanes rows of one vector each, in
/// log2(lanes) rounds of two-source shuffles (each round swaps the off-diagonal half-blocks of
/// every pair of rows `half` apart: after the rounds of half = lanes/2, ..., 1, row i holds column
/// i). Reads the rows at src + q * sc, writes row p of the block at dst + p * C.
constexpr int64_t kTransposeLanes = PTO_VECTOR_BYTES / 4;
typedef float vtranspose __attribute__((vector_size(PTO_VECTOR_BYTES)));
typedef int32_t vtranspose_mask __attribute__((vector_size(PTO_VECTOR_BYTES)));

template <int64_t H, bool Low>
inline vtranspose_mask transpose_mask() {
  vtranspose_mask m;
  for (int64_t l = 0; l < kTransposeLanes; ++l)
    m[l] = static_cast<int32_t>(Low ? ((l & H) == 0 ? l : kTransposeLanes + l - H)
                                    : ((l & H) == 0 ? l + H : kTransposeLanes + l));
  return m;
}

template <int64_t H>
inline __attribute__((always_inline)) void transpose_round(vtranspose* v) {
  if constexpr (H >= 1) {
    for (int64_t i = 0; i < kTransposeLanes; ++i)
      if ((i & H) == 0) {
        const vtranspose a = v[i], b = v[i + H];
        v[i] = __builtin_shuffle(a, b, transpose_mask<H, true>());
        v[i + H] = __builtin_shuffle(a, b, transpose_mask<H, false>());
      }
    transpose_round<H / 2>(v);
  }
}

/// Whether a transposed copy from S to T may go through float vectors: float tiles, and copies of
/// 4-byte elements of one type (the shuffles only move bits).
template <typename T, typename S>
constexpr bool kTransposeInRegisters = std::is_same<T, float>::value || (std::is_same<T, S>::value && sizeof(T) == 4);

/// Transposes one square block into the tile `dst` whose rows are `cols` elements apart.
template <typename T, typename S>
inline void transpose_block(T* __restrict dst, int64_t cols, const S* __restrict src, int64_t sc) {
  vtranspose v[kTransposeLanes];
  for (int64_t q = 0; q < kTransposeLanes; ++q) {
    if constexpr (std::is_same<S, float>::value || std::is_same<T, S>::value) {
      memcpy(&v[q], src + q * sc, sizeof v[q]);
    } else {
      for (int64_t l = 0; l < kTransposeLanes; ++l) v[q][l] = cvt<float>(src[q * sc + l]);
    }
  }
  transpose_round<kTransposeLanes / 2>(v);
  for (int64_t p = 0; p < kTransposeLanes; ++p) memcpy(dst + p * cols, &v[p], sizeof v[p]);
}
#endif

/// The transposed copy into a tile with rows of `cols` elements (see above).
template <typename T, typename S>
inline void tload_transposed(T* __restrict dst, int64_t cols, int64_t rows, const S* __restrict src, int64_t sc,
                             int64_t valid_rows, int64_t vc) {
  const int64_t vr = valid_rows < 0 ? 0 : valid_rows < rows ? valid_rows : rows;
  for (int64_t c0 = 0; c0 < vc; c0 += kTransposeBlock) {
    const int64_t c1 = c0 + kTransposeBlock < vc ? c0 + kTransposeBlock : vc;
    for (int64_t c = c1; c < c1 + kTransposeBlock && c < vc; ++c) prefetch_span<0>(src + c * sc, vr);
    for (int64_t r0 = 0; r0 < vr; r0 += kTransposeBlock) {
      const int64_t r1 = r0 + kTransposeBlock < vr ? r0 + kTransposeBlock : vr;
#if defined(PTO_HAS_SHUFFLE)
      // Whole blocks: kTransposeBlock / lanes squares transposed in registers.
      if constexpr (kTransposeInRegisters<T, S> && kTransposeBlock % kTransposeLanes == 0) {
        if (r1 - r0 == kTransposeBlock && c1 - c0 == kTransposeBlock) {
          for (int64_t cq = c0; cq < c1; cq += kTransposeLanes)
            for (int64_t rq = r0; rq < r1; rq += kTransposeLanes)
              transpose_block(dst + rq * cols + cq, cols, src + cq * sc + rq, sc);
          continue;
        }
      }
#endif
      for (int64_t c = c0; c < c1; ++c) {
        const S* __restrict s = src + c * sc;
        for (int64_t r = r0; r < r1; ++r) dst[r * cols + c] = cvt<T>(s[r]);
      }
    }
  }
  for (int64_t r = 0; r < vr; ++r)
    for (int64_t c = vc; c < cols; ++c) dst[r * cols + c] = T{};
  for (int64_t r = vr; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) dst[r * cols + c] = T{};
}

/// TLOAD into a tile whose last dim is `cols`: the copy itself, for a tile width known at compile
/// time (tload, where the inlined loops specialise on it) or at run time (the out-of-line copies).
template <typename T, typename S>
inline void tload_rows(T* __restrict dst, int64_t cols, int rank, const int64_t* tshape, const S* __restrict src,
                       const int64_t* stride, const int64_t* valid) {
  int64_t rows = 1;
  for (int d = 0; d < rank - 1; ++d) rows *= tshape[d];
  // The valid extent clamped to [0, cols] (a negative one moves nothing).
  const int64_t vc = valid[rank - 1] < 0 ? 0 : valid[rank - 1] < cols ? valid[rank - 1] : cols;
  const int64_t sc = stride[rank - 1];
  if (rank == 2 && stride[0] == 1 && sc > 1) {
    tload_transposed(dst, cols, tshape[0], src, sc, valid[0], vc);
    return;
  }
  const bool gaps = sc == 1 && rank >= 2 && stride[rank - 2] > vc;
  RowWalk walk(rank, tshape, valid, stride);
  for (int64_t r = 0; r < rows; ++r, walk.next()) {
    const int64_t off = walk.offset();
    prefetch_ahead<0>(gaps, rank, valid, stride, r, rows, src, vc);
    T* __restrict drow = dst + r * cols;
    if (!walk.inside()) {
      for (int64_t c = 0; c < cols; ++c) drow[c] = T{};
      continue;
    }
    const S* __restrict srow = src + off;
    if (sc == 1 && vc == cols) {
      for (int64_t c = 0; c < cols; ++c) drow[c] = cvt<T>(srow[c]);
    } else {
      for (int64_t c = 0; c < vc; ++c) drow[c] = cvt<T>(srow[c * sc]);
      for (int64_t c = vc; c < cols; ++c) drow[c] = T{};
    }
  }
}

/// Whether a copy from S to T is one of the out-of-line copies (same type, of 1, 2, 4 or 8 bytes:
/// a copy of bits, whose zero fill is all-zero bits for every element type).
template <typename T, typename S>
constexpr bool kBitCopy = std::is_same<T, S>::value && std::is_trivially_copyable<T>::value &&
                          (sizeof(T) == 1 || sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8);

/// The size class of a bit copy: 0, 1, 2, 3 for elements of 1, 2, 4, 8 bytes.
template <typename T>
constexpr int kSizeClass = sizeof(T) == 1 ? 0 : sizeof(T) == 2 ? 1 : sizeof(T) == 4 ? 2 : 3;

/// Whether H is one of the half-precision types the out-of-line copies convert to and from float.
template <typename H>
constexpr bool kHalf = std::is_same<H, f16>::value || std::is_same<H, bf16>::value;

#ifdef PTO_OUT_OF_LINE_COPIES
/// The copies compiled once per tile-library variant into pypto (codegen/tile_ops/copies.cc), which
/// binds this table when it loads the kernel library (pypto_bind_tile_copies): a kernel then compiles
/// only calls, not its own copy of the generic copy loops.
static const pypto_tile_copies* g_tile_copies = nullptr;
#endif

template <typename T, int64_t C, typename S>
inline void tload(T* __restrict dst, int rank, const int64_t* tshape, const S* __restrict src, const int64_t* stride,
                  const int64_t* valid) {
#ifdef PTO_OUT_OF_LINE_COPIES
  if constexpr (kBitCopy<T, S>) {
    g_tile_copies->load[kSizeClass<T>](dst, C, rank, tshape, src, stride, valid);
  } else if constexpr (std::is_same<T, float>::value && kHalf<S>) {
    g_tile_copies->load_half[std::is_same<S, bf16>::value](dst, C, rank, tshape, src, stride, valid);
  } else
#endif
  {
    tload_rows(dst, C, rank, tshape, src, stride, valid);
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

/// TLOAD ... view strided: where the box is whole (valid covers the tile), its rows are dense
/// (innermost stride 1) and the dims before the last two are 1, the tile is `src` with the source's
/// row pitch `ld`; otherwise it is loaded into `buf` as tload does, `ld` its own row length.
template <typename T, int64_t C>
inline const T* tload_view_strided(T* __restrict buf, int rank, const int64_t* tshape, const T* src,
                                   const int64_t* stride, const int64_t* valid, int64_t& ld) {
  bool rows = rank >= 2 && stride[rank - 1] == 1;
  for (int d = 0; d < rank && rows; ++d) rows = valid[d] >= tshape[d] && (d >= rank - 2 || tshape[d] == 1);
  if (rows) {
    ld = tshape[rank - 2] == 1 ? C : stride[rank - 2];
    return src;
  }
  ld = C;
  tload<T, C>(buf, rank, tshape, src, stride, valid);
  return buf;
}

/// Element offsets ahead along a source row at which a transposing panel load prefetches.
constexpr int64_t kPanelPrefetch = 64;

/// TLOAD ... panels=W: the box into a tile of `rows` x `cols` (rows: the product of the tile's
/// leading dims) laid out in column panels of W columns, the layout the float matmul reads its b
/// operand in (tmatmul_panels): panel j holds columns [jW, jW + W) of every row, row after row, so
/// element (r, c) is at dst[(c / W) * rows * W + r * W + c % W] and the micro-kernel reads each
/// panel from one contiguous run. Elements outside the valid box are zero, as tload's are. A
/// transposed rank-2 source (rows contiguous along the tile's first dim: a weight stored [N, K]
/// read as b = w^T) is transposed in square blocks of vector registers straight into the panels;
/// f16 and bf16 sources are widened on the way (one pass over the source, no tile of the narrow
/// type in between).
/// The panel load for a width WC known at compile time (0: the width W at run time), so that a
/// panel row of a whole row's copy is a few vector moves (with W at run time, a loop of 16 floats
/// paid a vectorised loop's set-up for each).
template <int64_t WC, typename T, typename S>
inline void tload_panels_of(T* __restrict dst, int64_t W, int64_t cols, int rank, const int64_t* tshape,
                            const S* __restrict src, const int64_t* stride, const int64_t* valid) {
  if constexpr (WC > 0) W = WC;
  int64_t rows = 1;
  for (int d = 0; d < rank - 1; ++d) rows *= tshape[d];
  const int64_t vc = valid[rank - 1] < 0 ? 0 : valid[rank - 1] < cols ? valid[rank - 1] : cols;
  const int64_t sc = stride[rank - 1];
  const int64_t panels = cols / W;
  if (rank == 2 && stride[0] == 1 && sc > 1) {
    const int64_t vr = valid[0] < 0 ? 0 : valid[0] < rows ? valid[0] : rows;
    constexpr int64_t L = PTO_VECTOR_BYTES / 4;
    for (int64_t j = 0; j < panels; ++j) {
      T* __restrict d = dst + j * rows * W;
      const int64_t c0 = j * W;
      for (int64_t r0 = 0; r0 < vr; r0 += L) {
        if (r0 % (2 * L) == 0 && r0 + kPanelPrefetch < vr)
          for (int64_t c = 0; c < W && c0 + c < vc; ++c) __builtin_prefetch(src + (c0 + c) * sc + r0 + kPanelPrefetch);
        for (int64_t cq = 0; cq < W; cq += L) {
#if defined(PTO_HAS_SHUFFLE)
          if constexpr (kTransposeInRegisters<T, S>) {
            if (cq + L <= W && r0 + L <= vr && c0 + cq + L <= vc) {
              transpose_block(d + r0 * W + cq, W, src + (c0 + cq) * sc + r0, sc);
              continue;
            }
          }
#endif
          for (int64_t r = r0; r < r0 + L && r < rows; ++r)
            for (int64_t c = cq; c < cq + L && c < W; ++c)
              d[r * W + c] = r < vr && c0 + c < vc ? cvt<T>(src[(c0 + c) * sc + r]) : T{};
        }
      }
      for (int64_t r = (vr + L - 1) / L * L; r < rows; ++r)
        for (int64_t c = 0; c < W; ++c) d[r * W + c] = T{};
    }
    return;
  }
  const bool gaps = sc == 1 && rank >= 2 && stride[rank - 2] > vc;
  RowWalk walk(rank, tshape, valid, stride);
  for (int64_t r = 0; r < rows; ++r, walk.next()) {
    prefetch_ahead<0>(gaps, rank, valid, stride, r, rows, src, vc);
    const bool inside = walk.inside();
    const S* __restrict srow = src + walk.offset();
    for (int64_t j = 0; j < panels; ++j) {
      T* __restrict d = dst + j * rows * W + r * W;
      const int64_t c0 = j * W;
      if (!inside) {
        for (int64_t c = 0; c < W; ++c) d[c] = T{};
      } else if (sc == 1 && c0 + W <= vc) {
        for (int64_t c = 0; c < W; ++c) d[c] = cvt<T>(srow[c0 + c]);
      } else {
        for (int64_t c = 0; c < W; ++c) d[c] = c0 + c < vc ? cvt<T>(srow[(c0 + c) * sc]) : T{};
      }
    }
  }
}

template <typename T, typename S>
inline void tload_panels_rows(T* __restrict dst, int64_t W, int64_t cols, int rank, const int64_t* tshape,
                              const S* __restrict src, const int64_t* stride, const int64_t* valid) {
  switch (W) {  // the targets' widths: two vectors of 16, 32 or 64 bytes
    case 8: return tload_panels_of<8>(dst, W, cols, rank, tshape, src, stride, valid);
    case 16: return tload_panels_of<16>(dst, W, cols, rank, tshape, src, stride, valid);
    case 32: return tload_panels_of<32>(dst, W, cols, rank, tshape, src, stride, valid);
    default: return tload_panels_of<0>(dst, W, cols, rank, tshape, src, stride, valid);
  }
}

/// TLOAD ... panels=W of a tile whose last dim is C (see tload_panels_rows).
template <typename T, int64_t C, int64_t W, typename S>
inline void tload_panels(T* __restrict dst, int rank, const int64_t* tshape, const S* __restrict src,
                         const int64_t* stride, const int64_t* valid) {
  static_assert(W > 0 && C % W == 0, "a panel load's width divides the tile's columns");
#ifdef PTO_OUT_OF_LINE_COPIES
  if constexpr (std::is_same<T, float>::value && (std::is_same<S, float>::value || kHalf<S>)) {
    g_tile_copies->load_panels[std::is_same<S, float>::value ? 0 : std::is_same<S, f16>::value ? 1 : 2](
        dst, W, C, rank, tshape, src, stride, valid);
  } else
#endif
  {
    tload_panels_of<W>(dst, W, C, rank, tshape, src, stride, valid);
  }
}

#ifdef PTO_STREAM_STORES
/// Writes one full row of `n` floats (a multiple of 16) to a 64-byte-aligned `drow` with
/// non-temporal (streaming) stores, which do not first read the destination's cache lines from memory.
inline void stream_row(float* drow, const float* srow, int64_t n) {
  typedef float V __attribute__((vector_size(PTO_VECTOR_BYTES)));
  constexpr int64_t kW = PTO_VECTOR_BYTES / 4;
  for (int64_t c = 0; c < n; c += kW) {
    V v;
    memcpy(&v, srow + c, sizeof v);  // an unaligned load
#if defined(__clang__)
    __builtin_nontemporal_store(v, reinterpret_cast<V*>(drow + c));
#elif PTO_VECTOR_BYTES == 64
    __builtin_ia32_movntps512(drow + c, v);
#elif PTO_VECTOR_BYTES == 32
    __builtin_ia32_movntps256(drow + c, v);
#else
    __builtin_ia32_movntps(drow + c, v);
#endif
  }
}
#endif

/// Stores `n` values at `dst` with element stride `stride`, converted to the destination type. With
/// STREAM, a dense float run of a multiple of 16 values starting on a 64-byte boundary goes through
/// stream_row.
template <bool STREAM, typename S, typename T>
inline void store_run(S* __restrict dst, int64_t stride, const T* __restrict src, int64_t n) {
  if (stride == 1) {
#ifdef PTO_STREAM_STORES
    if constexpr (STREAM && std::is_same<T, float>::value && std::is_same<S, float>::value) {
      if (n % 16 == 0 && (reinterpret_cast<uintptr_t>(dst) & 63) == 0) {
        stream_row(dst, src, n);
        return;
      }
    }
#endif
    for (int64_t k = 0; k < n; ++k) dst[k] = cvt<S>(src[k]);
  } else {
    for (int64_t k = 0; k < n; ++k) dst[k * stride] = cvt<S>(src[k]);
  }
}

/// store_run of N values, N known at compile time (a full tile row, or a strip of a fused chain).
template <bool STREAM, int64_t N, typename S, typename T>
inline void store_strip(S* __restrict dst, int64_t stride, const T* __restrict src) {
  store_run<STREAM>(dst, stride, src, N);
}

/// Adds `v` (of the tile's type T) into `*p` as one atomic read-modify-write: an integer of the same
/// type with a fetch-add, anything else with a compare-and-swap loop on the element's bits (the sum
/// computed in T and rounded to S, as a plain store would). Relaxed: the runtime's task completion
/// orders the additions before any reader.
template <typename S, typename T>
inline void atomic_add_element(S* p, T v) {
  if constexpr (std::is_integral_v<S> && std::is_same_v<S, T> && !std::is_same_v<S, bool>) {
    __atomic_fetch_add(p, v, __ATOMIC_RELAXED);
  } else {
    static_assert(sizeof(S) == 1 || sizeof(S) == 2 || sizeof(S) == 4 || sizeof(S) == 8, "atomic element size");
    using U = std::conditional_t<sizeof(S) == 1, uint8_t, std::conditional_t<sizeof(S) == 2, uint16_t,
              std::conditional_t<sizeof(S) == 4, uint32_t, uint64_t>>>;
    U* q = reinterpret_cast<U*>(p);
    U old = __atomic_load_n(q, __ATOMIC_RELAXED);
    for (;;) {
      S cur;
      memcpy(&cur, &old, sizeof cur);
      const S sum = cvt<S>(static_cast<T>(cvt<T>(cur) + v));
      U bits;
      memcpy(&bits, &sum, sizeof bits);
      if (__atomic_compare_exchange_n(q, &old, bits, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) return;
    }
  }
}

/// TSTORE: the valid part of a tile whose last dim is `cols` into a strided box. With STREAM, full
/// float rows whose start is 64-byte aligned go through stream_row; with ATOMIC (TSTORE ...
/// atomic_add) each element is added into the box atomically, so tasks adding into one tensor may
/// run at once.
template <typename T, typename S, bool STREAM, bool ATOMIC>
inline void tstore_rows(S* __restrict dst, const int64_t* stride, const int64_t* valid, int rank, const int64_t* tshape,
                        const T* __restrict src, int64_t cols) {
  int64_t rows = 1;
  for (int d = 0; d < rank - 1; ++d) rows *= tshape[d];
  // The valid extent clamped to [0, cols] (a negative one moves nothing).
  const int64_t vc = valid[rank - 1] < 0 ? 0 : valid[rank - 1] < cols ? valid[rank - 1] : cols;
  const int64_t sc = stride[rank - 1];
  const bool gaps = !STREAM && sc == 1 && rank >= 2 && stride[rank - 2] > vc;
  RowWalk walk(rank, tshape, valid, stride);
  for (int64_t r = 0; r < rows; ++r, walk.next()) {
    prefetch_ahead<1>(gaps, rank, valid, stride, r, rows, dst, vc);
    if (!walk.inside()) continue;
    const int64_t off = walk.offset();
    const T* __restrict srow = src + r * cols;
    S* __restrict drow = dst + off;
    if constexpr (ATOMIC) {
      for (int64_t c = 0; c < vc; ++c) atomic_add_element<S, T>(drow + c * sc, srow[c]);
    } else if (vc == cols) {
      store_run<STREAM>(drow, sc, srow, cols);
    } else if (sc == 1) {
      for (int64_t c = 0; c < vc; ++c) drow[c] = cvt<S>(srow[c]);
    } else {
      for (int64_t c = 0; c < vc; ++c) drow[c * sc] = cvt<S>(srow[c]);
    }
  }
}

/// TSTORE of a tile whose last dim is C (see tstore_rows).
template <typename T, int64_t C, typename S, bool STREAM = false, bool ATOMIC = false>
inline void tstore(S* __restrict dst, const int64_t* stride, const int64_t* valid, int rank, const int64_t* tshape,
                   const T* __restrict src) {
#ifdef PTO_OUT_OF_LINE_COPIES
  if constexpr (kBitCopy<T, S> && !ATOMIC) {
    if constexpr (STREAM && std::is_same<T, float>::value)
      g_tile_copies->store_stream(dst, stride, valid, rank, tshape, src, C);
    else
      g_tile_copies->store[kSizeClass<T>](dst, stride, valid, rank, tshape, src, C);
  } else if constexpr (std::is_same<T, float>::value && kHalf<S> && !ATOMIC) {
    g_tile_copies->store_half[std::is_same<S, bf16>::value](dst, stride, valid, rank, tshape, src, C);
  } else
#endif
  {
    tstore_rows<T, S, STREAM, ATOMIC>(dst, stride, valid, rank, tshape, src, C);
  }
}

/// TSTORE into a large output that is not read again soon (see tstore's STREAM). A kernel that
/// calls it ends with stream_fence().
template <typename T, int64_t C, typename S>
inline void tstore_stream(S* __restrict dst, const int64_t* stride, const int64_t* valid, int rank,
                          const int64_t* tshape, const T* __restrict src) {
  tstore<T, C, S, true>(dst, stride, valid, rank, tshape, src);
}

/// TSTORE ... atomic_add (see tstore's ATOMIC).
template <typename T, int64_t C, typename S>
inline void tstore_atomic_add(S* __restrict dst, const int64_t* stride, const int64_t* valid, int rank,
                              const int64_t* tshape, const T* __restrict src) {
  tstore<T, C, S, false, true>(dst, stride, valid, rank, tshape, src);
}

/// Orders a kernel's streaming stores before the runtime marks its task finished.
inline void stream_fence() {
#ifdef PTO_STREAM_STORES
  __builtin_ia32_sfence();
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

}  // namespace pto

#ifdef PTO_OUT_OF_LINE_COPIES
/// Binds the out-of-line copies (pto::g_tile_copies) before any kernel runs; non-zero when `copies`
/// has another layout than this source was compiled for.
extern "C" int32_t pypto_bind_tile_copies(const pypto_tile_copies* copies) {
  if (copies == nullptr || copies->version != PYPTO_TILE_COPIES_VERSION) return 1;
  pto::g_tile_copies = copies;
  return 0;
}
#endif
