// The out-of-line tile copies (codegen/tile_ops/copies.cc, one table per tile-library variant):
// each variant this CPU can run loads and stores exactly the bytes the inline copies of
// tile_ops.h do, over random boxes (ranks 2 to 4, strided, transposed, tails, valid extents past
// the tile or below zero), every element size and the half-precision conversions; panel loads
// (TLOAD ... panels) hold the row-major load's elements in the panels' places; and which variant a
// target's kernels get.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "codegen/tile_copies.h"
#include "runtime/pypto_abi.h"
// tile_ops.h is pasted after pypto_abi.h into generated code; include it the same way.
#include "codegen/tile_ops.h"
#include "../sanitized.h"

namespace pypto::codegen {
namespace {

/// The targets whose code runs on this CPU and that have a table.
std::vector<std::pair<std::string, const pypto_tile_copies*>> RunnableTables() {
  std::vector<std::pair<std::string, const pypto_tile_copies*>> out;
  for (const std::string& name : target_names()) {
    Target t = target_by_name(name);
    if (!missing_on_host(t).empty()) continue;
    if (const pypto_tile_copies* c = tile_copies_for(t)) out.emplace_back(name, c);
  }
  return out;
}

/// A random box: the tile's shape, the source's strides (element units) and valid extents.
struct Box {
  int rank = 2;
  int64_t shape[4] = {};
  int64_t stride[4] = {};
  int64_t valid[4] = {};
  int64_t span = 0;  ///< elements the strided box reaches (the buffer's size)
};

Box RandomBox(std::mt19937& rng) {
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  Box b;
  b.rank = static_cast<int>(pick(2, 4));
  for (int d = 0; d < b.rank; ++d) b.shape[d] = pick(1, d == b.rank - 1 ? 70 : 6);
  if (b.rank == 2 && pick(0, 3) == 0) {
    // A transposed box: the tile's rows are contiguous along its first dim.
    b.shape[0] = pick(1, 40);
    b.stride[0] = 1;
    b.stride[1] = b.shape[0] + pick(0, 5);
  } else {
    // Row-major with padding, or an element stride of 2 in the last dim now and then.
    int64_t inner = pick(0, 5) == 0 ? 2 : 1;
    for (int d = b.rank - 1; d >= 0; --d) {
      b.stride[d] = inner;
      inner = inner * b.shape[d] + pick(0, 3) * (d > 0);
    }
  }
  for (int d = 0; d < b.rank; ++d) {
    const int64_t r = pick(0, 9);
    b.valid[d] = r == 0 ? -1 : r == 1 ? b.shape[d] + 3 : r < 5 ? pick(0, b.shape[d]) : b.shape[d];
  }
  for (int d = 0; d < b.rank; ++d) b.span += (b.shape[d] - 1) * b.stride[d];
  b.span += 1;
  return b;
}

int64_t TileElements(const Box& b) {
  int64_t n = 1;
  for (int d = 0; d < b.rank; ++d) n *= b.shape[d];
  return n;
}

/// Bytes that are random, except that half-precision sources also hold their special values.
template <typename U>
std::vector<U> RandomElements(std::mt19937& rng, int64_t n) {
  std::vector<U> v(static_cast<size_t>(n));
  for (auto& x : v) {
    uint64_t bits = (static_cast<uint64_t>(rng()) << 32) | rng();
    std::memcpy(&x, &bits, sizeof x);
  }
  return v;
}

std::vector<float> RandomFloats(std::mt19937& rng, int64_t n) {
  const float special[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 65504.0f, 65520.0f, 1e-8f, 3.4e38f, 1.0f + 0x1p-11f};
  std::vector<float> v(static_cast<size_t>(n));
  std::normal_distribution<float> normal(0.0f, 1000.0f);
  for (size_t i = 0; i < v.size(); ++i) v[i] = rng() % 5 == 0 ? special[rng() % 10] : normal(rng);
  return v;
}

/// The values of `wide` rounded to fp16 and to bf16 (the sources of the widening loads).
std::pair<std::vector<pto::f16>, std::vector<pto::bf16>> Narrowed(const std::vector<float>& wide) {
  std::vector<pto::f16> halves(wide.size());
  std::vector<pto::bf16> brains(wide.size());
  for (size_t i = 0; i < wide.size(); ++i) {
    halves[i] = pto::cvt<pto::f16>(wide[i]);
    brains[i] = pto::cvt<pto::bf16>(wide[i]);
  }
  return {halves, brains};
}

/// One load through the table's entry `fn` against the inline copy, as raw bytes.
template <typename T, typename S, typename Fn>
void CompareLoad(const std::string& target, Fn fn, const Box& b, const std::vector<S>& src) {
  const int64_t cols = b.shape[b.rank - 1];
  std::vector<T> want(static_cast<size_t>(TileElements(b))), got(want.size());
  std::memset(want.data(), 0xab, want.size() * sizeof(T));
  std::memset(got.data(), 0xab, got.size() * sizeof(T));
  pto::tload_rows(want.data(), cols, b.rank, b.shape, src.data(), b.stride, b.valid);
  fn(got.data(), cols, b.rank, b.shape, src.data(), b.stride, b.valid);
  ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(T)))
      << target << ": load of " << sizeof(S) << "-byte elements into " << sizeof(T) << "-byte ones, rank " << b.rank
      << ", shape " << b.shape[0] << "x" << b.shape[1] << ", strides " << b.stride[0] << "," << b.stride[1];
}

/// One store through `fn` against the inline copy: the whole destination, so nothing outside the
/// box may change.
template <typename T, typename S, bool STREAM, typename Fn>
void CompareStore(const std::string& target, Fn fn, const Box& b, const std::vector<T>& tile, std::mt19937& rng) {
  const int64_t cols = b.shape[b.rank - 1];
  const std::vector<S> before = RandomElements<S>(rng, b.span + 64);
  std::vector<S> want = before, got = before;
  pto::tstore_rows<T, S, STREAM, false>(want.data(), b.stride, b.valid, b.rank, b.shape, tile.data(), cols);
  fn(got.data(), b.stride, b.valid, b.rank, b.shape, tile.data(), cols);
  pto::stream_fence();
  ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(S)))
      << target << ": store of " << sizeof(T) << "-byte elements into " << sizeof(S) << "-byte ones, rank " << b.rank
      << ", shape " << b.shape[0] << "x" << b.shape[1] << ", strides " << b.stride[0] << "," << b.stride[1];
}

template <typename U>
void CompareBitCopies(const std::string& target, const pypto_tile_copies* c, int size_class, std::mt19937& rng) {
  for (int round = 0; round < test::Thinned(300); ++round) {
    const Box b = RandomBox(rng);
    CompareLoad<U, U>(target, c->load[size_class], b, RandomElements<U>(rng, b.span));
    CompareStore<U, U, false>(target, c->store[size_class], b, RandomElements<U>(rng, TileElements(b)), rng);
  }
}

TEST(TileCopiesTest, EveryRunnableVariantCopiesTheBytesTheInlineCopiesDo) {
  const auto tables = RunnableTables();
  ASSERT_FALSE(tables.empty()) << "no table for any target this CPU runs";
  for (const auto& [target, c] : tables) {
    ASSERT_EQ(c->version, PYPTO_TILE_COPIES_VERSION) << target;
    std::mt19937 rng(17);
    CompareBitCopies<uint8_t>(target, c, 0, rng);
    CompareBitCopies<uint16_t>(target, c, 1, rng);
    CompareBitCopies<uint32_t>(target, c, 2, rng);
    CompareBitCopies<uint64_t>(target, c, 3, rng);
    for (int round = 0; round < test::Thinned(300); ++round) {
      const Box b = RandomBox(rng);
      const std::vector<float> floats = RandomFloats(rng, TileElements(b));
      CompareStore<float, float, true>(target, c->store_stream, b, floats, rng);
      CompareStore<float, pto::f16, false>(target, c->store_half[0], b, floats, rng);
      CompareStore<float, pto::bf16, false>(target, c->store_half[1], b, floats, rng);
      const std::vector<float> wide = RandomFloats(rng, b.span);
      const auto [halves, brains] = Narrowed(wide);
      CompareLoad<float, pto::f16>(target, c->load_half[0], b, halves);
      CompareLoad<float, pto::bf16>(target, c->load_half[1], b, brains);
    }
  }
}

/// A random box for a panel load of width W: RandomBox's, with W columns or two to four times W
/// (strides and the last dim's valid extent drawn again for them).
Box PanelBox(std::mt19937& rng, int64_t W) {
  auto pick = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  Box b = RandomBox(rng);
  const int last = b.rank - 1;
  const int64_t cols = W * pick(1, 4);
  b.shape[last] = cols;
  if (!(b.rank == 2 && b.stride[0] == 1)) {
    int64_t inner = b.stride[last];
    for (int d = last; d >= 0; --d) {
      b.stride[d] = inner;
      inner = inner * b.shape[d] + pick(0, 3) * (d > 0);
    }
  }
  const int64_t r = pick(0, 9);
  b.valid[last] = r == 0 ? -1 : r == 1 ? cols + 3 : r < 5 ? pick(0, cols) : cols;
  b.span = 1;
  for (int d = 0; d < b.rank; ++d) b.span += (b.shape[d] - 1) * b.stride[d];
  return b;
}

/// The tile of a panel load: the row-major load's elements, laid out in panels of W columns.
std::vector<float> InPanels(const std::vector<float>& rows_major, int64_t rows, int64_t cols, int64_t W) {
  std::vector<float> out(rows_major.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[(c / W) * rows * W + r * W + c % W] = rows_major[r * cols + c];
  return out;
}

/// A panel load (inline, and through `fn` when given) against the row-major load relaid, as raw
/// bytes: the same elements, zeros outside the valid box, in the panels' places.
template <typename S>
void ComparePanelLoad(const std::string& target, const pypto_tile_copies* c, int entry, const Box& b,
                      const std::vector<S>& src, int64_t W) {
  const int64_t cols = b.shape[b.rank - 1], rows = TileElements(b) / cols;
  std::vector<float> plain(static_cast<size_t>(TileElements(b))), got(plain.size());
  pto::tload_rows(plain.data(), cols, b.rank, b.shape, src.data(), b.stride, b.valid);
  const std::vector<float> want = InPanels(plain, rows, cols, W);
  std::memset(got.data(), 0xab, got.size() * sizeof(float));
  pto::tload_panels_rows(got.data(), W, cols, b.rank, b.shape, src.data(), b.stride, b.valid);
  ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)))
      << "inline panel load of " << sizeof(S) << "-byte elements, width " << W << ", rank " << b.rank << ", shape "
      << b.shape[0] << "x" << b.shape[1] << ", strides " << b.stride[0] << "," << b.stride[1];
  if (c == nullptr) return;
  std::memset(got.data(), 0xab, got.size() * sizeof(float));
  c->load_panels[entry](got.data(), W, cols, b.rank, b.shape, src.data(), b.stride, b.valid);
  ASSERT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * sizeof(float)))
      << target << ": panel load of " << sizeof(S) << "-byte elements, width " << W << ", rank " << b.rank
      << ", shape " << b.shape[0] << "x" << b.shape[1] << ", strides " << b.stride[0] << "," << b.stride[1];
}

TEST(TileCopiesTest, PanelLoadsHoldTheRowMajorLoadsElements) {
  std::vector<std::pair<std::string, const pypto_tile_copies*>> tables = RunnableTables();
  tables.emplace_back("inline", nullptr);
  for (const auto& [target, c] : tables) {
    std::mt19937 rng(23);
    for (int round = 0; round < test::Thinned(400); ++round) {
      const int64_t W = int64_t{4} << (rng() % 4);  // 4, 8, 16, 32
      const Box b = PanelBox(rng, W);
      const std::vector<float> wide = RandomFloats(rng, b.span);
      const auto [halves, brains] = Narrowed(wide);
      ComparePanelLoad<float>(target, c, 0, b, wide, W);
      ComparePanelLoad<pto::f16>(target, c, 1, b, halves, W);
      ComparePanelLoad<pto::bf16>(target, c, 2, b, brains, W);
    }
  }
}

TEST(TileCopiesTest, StreamingStoresOfAlignedFullRowsMatchPlainStores) {
  // Rows of a multiple of 16 floats starting on 64-byte boundaries take the streaming path.
  for (const auto& [target, c] : RunnableTables()) {
    std::vector<float> tile(4 * 64);
    for (size_t i = 0; i < tile.size(); ++i) tile[i] = static_cast<float>(i) * 0.5f;
    const int64_t shape[] = {4, 64}, stride[] = {80, 1}, valid[] = {4, 64};
    float* a = static_cast<float*>(std::aligned_alloc(64, 4 * 80 * sizeof(float)));
    float* b = static_cast<float*>(std::aligned_alloc(64, 4 * 80 * sizeof(float)));
    for (int i = 0; i < 4 * 80; ++i) a[i] = b[i] = -1.0f;
    pto::tstore_rows<float, float, false, false>(a, stride, valid, 2, shape, tile.data(), 64);
    c->store_stream(b, stride, valid, 2, shape, tile.data(), 64);
    pto::stream_fence();
    EXPECT_EQ(0, std::memcmp(a, b, 4 * 80 * sizeof(float))) << target;
    std::free(a);
    std::free(b);
  }
}

TEST(TileCopiesTest, EachTargetGetsItsOwnVariantOrNone) {
  const auto variants = tile_copies_variants();
  ASSERT_FALSE(variants.empty());
  EXPECT_EQ(variants.front(), "generic");
  // The generic target's kernels and this CPU's (native) always have a table.
  EXPECT_NE(tile_copies_for(target_by_name("generic")), nullptr);
  EXPECT_NE(tile_copies_for(target_by_name("native")), nullptr);
  // Named targets get the variant of their own tile library, also where this CPU cannot run it
  // (kernels for it are compiled, never run, here).
  for (const std::string& name : target_names()) {
    const Target t = target_by_name(name);
    const bool built = std::find(variants.begin(), variants.end(), t.library_name()) != variants.end();
    if (name != "native") EXPECT_EQ(tile_copies_for(t) != nullptr, built) << name;
  }
  // Code for another architecture never gets one of this build's tables.
  Target other = target_by_name("generic");
  other.arch = other.arch == "x86_64" ? "aarch64" : "x86_64";
  EXPECT_EQ(tile_copies_for(other), nullptr);
}

TEST(TileCopiesTest, NativeKernelsGetAVariantThisCpuRuns) {
  const pypto_tile_copies* native = tile_copies_for(target_by_name("native"));
  bool runnable = false;
  for (const auto& [target, c] : RunnableTables()) runnable = runnable || (c == native && target != "native");
  EXPECT_TRUE(runnable) << "native's table is none of the runnable named targets'";
}

}  // namespace
}  // namespace pypto::codegen
