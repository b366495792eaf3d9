// Streaming stores of tile_ops.h (pto::tstore_stream): the memory they leave is exactly what
// pto::tstore leaves, for aligned and unaligned rows, strided boxes, tails and other types. Loads of
// transposed boxes (pto::tload's blocked copy) against element-by-element indexing. Loads and stores
// of rank-3 and rank-4 tiles whose valid box ends inside any dim, against the same indexing.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

#include "runtime/pypto_abi.h"
// tile_ops.h is pasted after pypto_abi.h into generated code; include it the same way.
#include "codegen/tile_ops.h"

namespace pypto::codegen {
namespace {

// Stores a ROWS x C tile into a box of a destination with the given strides, both ways, and
// compares the whole destination (so nothing outside the box is touched either).
template <typename T, int64_t ROWS, int64_t C>
void Compare(int64_t shift, int64_t row_stride, int64_t col_stride, int64_t valid_rows, int64_t valid_cols) {
  const int64_t n = shift + ROWS * row_stride + C * col_stride + 64;
  T* a = static_cast<T*>(std::aligned_alloc(64, ((n * sizeof(T) + 63) / 64) * 64));
  T* b = static_cast<T*>(std::aligned_alloc(64, ((n * sizeof(T) + 63) / 64) * 64));
  for (int64_t i = 0; i < n; ++i) a[i] = b[i] = static_cast<T>(-1);
  std::vector<T> tile(ROWS * C);
  for (int64_t i = 0; i < ROWS * C; ++i) tile[i] = static_cast<T>(i % 97);
  const int64_t stride[] = {row_stride, col_stride};
  const int64_t valid[] = {valid_rows, valid_cols};
  const int64_t shape[] = {ROWS, C};
  pto::tstore<T, C>(a + shift, stride, valid, 2, shape, tile.data());
  pto::tstore_stream<T, C>(b + shift, stride, valid, 2, shape, tile.data());
  pto::stream_fence();
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(a[i], b[i]) << "element " << i;
  std::free(a);
  std::free(b);
}

TEST(TileStoreTest, StreamingStoresMatchPlainStores) {
  Compare<float, 4, 64>(0, 64, 1, 4, 64);     // dense, aligned rows: streamed
  Compare<float, 4, 64>(0, 80, 1, 4, 64);     // padded rows, 64-byte aligned (80 floats = 320 bytes)
  Compare<float, 4, 64>(3, 64, 1, 4, 64);     // misaligned rows: plain stores
  Compare<float, 4, 64>(0, 64, 1, 3, 64);     // a row tail
  Compare<float, 4, 64>(0, 64, 1, 4, 40);     // a column tail: plain stores
  Compare<float, 4, 64>(0, 1, 4, 4, 64);      // transposed destination: plain stores
  Compare<float, 2, 4096>(16, 4096, 1, 2, 4096);
  Compare<float, 3, 24>(0, 32, 1, 3, 24);     // C not a multiple of 16: plain stores
  Compare<double, 4, 64>(0, 64, 1, 4, 64);    // other types: plain stores
  Compare<int32_t, 4, 64>(0, 64, 1, 4, 64);
}

// A ROWS x C tile of the transpose of a row-major matrix (element (r, c) at src[r + c * ld]), with
// valid rows and columns, into a tile: the box's elements, zeros outside it.
template <typename T, int64_t ROWS, int64_t C, typename S = float>
void CheckTransposedLoad(int64_t ld, int64_t valid_rows, int64_t valid_cols) {
  std::vector<S> src(C * ld);
  for (size_t i = 0; i < src.size(); ++i) src[i] = pto::cvt<S>(static_cast<float>(i % 1013) - 500.0f);
  std::vector<T> tile(ROWS * C, static_cast<T>(-7));
  const int64_t stride[] = {1, ld};
  const int64_t valid[] = {valid_rows, valid_cols};
  const int64_t shape[] = {ROWS, C};
  pto::tload<T, C>(tile.data(), 2, shape, src.data(), stride, valid);
  for (int64_t r = 0; r < ROWS; ++r)
    for (int64_t c = 0; c < C; ++c) {
      T want = r < valid_rows && c < valid_cols ? static_cast<T>(pto::cvt<float>(src[r + c * ld])) : T(0);
      ASSERT_EQ(tile[r * C + c], want) << "at (" << r << ", " << c << ") valid " << valid_rows << "x" << valid_cols;
    }
}

TEST(TileLoadTest, TransposedBoxesLoadInBlocks) {
  CheckTransposedLoad<float, 64, 48>(80, 64, 48);    // whole blocks (transposed in registers)
  CheckTransposedLoad<float, 64, 64>(2048, 64, 64);  // a weight's rows 8 KiB apart
  CheckTransposedLoad<float, 48, 32, pto::bf16>(56, 48, 32);  // a bf16 source, widened as it loads
  CheckTransposedLoad<float, 48, 32, pto::bf16>(56, 45, 30);  // and its tails
  CheckTransposedLoad<float, 37, 21>(40, 37, 21);    // blocks with tails
  CheckTransposedLoad<float, 32, 32>(50, 19, 7);     // valid rows and columns inside the tile
  CheckTransposedLoad<double, 20, 17>(33, 20, 17);   // converted while loading
  CheckTransposedLoad<float, 8, 8>(8, 0, 8);         // nothing valid: all zero
}

// Loads a tile of shape `shape` (last dim 5) from a strided box and stores it back into a fresh
// destination, checking every tile element and every destination element by its index: rows
// outside the valid box load as zero and are not stored, whichever dim they leave it in.
void CheckRowWalk(int rank, const int64_t* shape, const int64_t* valid) {
  constexpr int64_t C = 5;
  int64_t stride[4] = {}, span = 1;
  for (int d = rank - 1; d >= 0; --d) {  // gaps between rows and between outer blocks
    stride[d] = span;
    span = span * (shape[d] + 2) + 1;
  }
  std::vector<float> src(static_cast<size_t>(span)), dst(static_cast<size_t>(span), -1.0f);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i) + 0.5f;
  int64_t total = 1;
  for (int d = 0; d < rank; ++d) total *= shape[d];
  std::vector<float> tile(static_cast<size_t>(total), -7.0f);
  pto::tload<float, C>(tile.data(), rank, shape, src.data(), stride, valid);
  pto::tstore<float, C>(dst.data(), stride, valid, rank, shape, tile.data());
  std::vector<bool> stored(src.size(), false);
  for (int64_t i = 0; i < total; ++i) {
    int64_t rem = i, off = 0;
    bool inside = true;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t k = rem % shape[d];
      rem /= shape[d];
      inside = inside && k < valid[d];
      off += k * stride[d];
    }
    ASSERT_EQ(tile[static_cast<size_t>(i)], inside ? src[static_cast<size_t>(off)] : 0.0f) << "rank " << rank << " element " << i;
    if (inside) stored[static_cast<size_t>(off)] = true;
  }
  for (size_t i = 0; i < dst.size(); ++i) ASSERT_EQ(dst[i], stored[i] ? src[i] : -1.0f) << "rank " << rank << " offset " << i;
}

TEST(TileLoadTest, RankThreeAndFourTilesLoadAndStoreTheirValidBoxRowByRow) {
  const int64_t shape3[] = {3, 4, 5};
  for (const auto& v : std::vector<std::vector<int64_t>>{{3, 4, 5}, {2, 4, 5}, {3, 1, 5}, {3, 4, 2}, {0, 4, 5}, {1, 3, 4}})
    CheckRowWalk(3, shape3, v.data());
  const int64_t shape4[] = {2, 3, 2, 5};
  for (const auto& v : std::vector<std::vector<int64_t>>{{2, 3, 2, 5}, {1, 3, 2, 5}, {2, 2, 1, 5}, {2, 3, 0, 5}, {2, 1, 2, 3}, {-1, 3, 2, 5}})
    CheckRowWalk(4, shape4, v.data());
}

}  // namespace
}  // namespace pypto::codegen
