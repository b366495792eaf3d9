// Gathers and scatters of tile_ops.h (pto::tgather, pto::tscatter): an index per element and one
// index per row (idx_cols 1, the row fast path), tails, out-of-range indices and accumulation order.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/pypto_abi.h"
// tile_ops.h is pasted after pypto_abi.h into generated code; include it the same way.
#include "codegen/tile_ops.h"

namespace pypto::codegen {
namespace {

constexpr int64_t kRows = 5, kCols = 7;  // the data: a [kRows, kCols] row-major array
const int64_t kStride[] = {kCols, 1};

std::vector<float> Data() {
  std::vector<float> d(kRows * kCols);
  for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<float>(i) * 0.5f - 3.0f;
  return d;
}

TEST(TileGatherScatter, GatherAlongEachAxisPerElement) {
  const std::vector<float> src = Data();
  const int64_t tshape[] = {3, 4}, valid[] = {3, 4};
  // axis 1: dst[i][j] = src[i][idx[i][j]]
  const int32_t idx1[] = {6, 0, 3, 3, 1, 1, 2, 5, 0, 6, 6, 4};
  float dst[12] = {};
  ASSERT_EQ(pto::tgather(dst, 2, tshape, valid, src.data(), kStride, idx1, 4, 1, kCols, "t"), 0);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) EXPECT_EQ(dst[i * 4 + j], src[i * kCols + idx1[i * 4 + j]]) << i << "," << j;
  // axis 0: dst[i][j] = src[idx[i][j]][j]
  const int64_t idx0[] = {4, 0, 1, 2, 3, 3, 0, 4, 2, 2, 2, 2};
  ASSERT_EQ(pto::tgather(dst, 2, tshape, valid, src.data(), kStride, idx0, 4, 0, kRows, "t"), 0);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; ++j) EXPECT_EQ(dst[i * 4 + j], src[idx0[i * 4 + j] * kCols + j]) << i << "," << j;
}

TEST(TileGatherScatter, GatherRowsWithOneIndexPerRowAndATail) {
  const std::vector<float> src = Data();
  const int64_t tshape[] = {4, 8}, valid[] = {3, 6};  // a tail in both dims
  const int64_t rows[] = {4, 0, 4, 99};                 // the fourth row is outside the valid part
  std::vector<float> dst(32, -7.0f);
  ASSERT_EQ(pto::tgather(dst.data(), 2, tshape, valid, src.data(), kStride, rows, 1, 0, kRows, "t"), 0);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 8; ++j) {
      const float want = i < 3 && j < 6 ? src[rows[i] * kCols + j] : -7.0f;  // nothing outside the valid part
      EXPECT_EQ(dst[i * 8 + j], want) << i << "," << j;
    }
  // The same rows spelled out per element take the same path's result.
  std::vector<int64_t> each(32);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 8; ++j) each[i * 8 + j] = rows[i];
  std::vector<float> again(32, -7.0f);
  ASSERT_EQ(pto::tgather(again.data(), 2, tshape, valid, src.data(), kStride, each.data(), 8, 0, kRows, "t"), 0);
  EXPECT_EQ(again, dst);
}

TEST(TileGatherScatter, ScatterAddAccumulatesDuplicateRowsInOrder) {
  std::vector<float> dst = Data(), want = Data();
  const int64_t tshape[] = {4, 7}, valid[] = {4, 7};
  const int32_t rows[] = {2, 2, 0, 2};
  std::vector<float> val(28);
  for (size_t i = 0; i < val.size(); ++i) val[i] = 1.0f + static_cast<float>(i % 5) * 0.25f;
  ASSERT_EQ(pto::tscatter<1>(dst.data(), kStride, valid, 2, tshape, rows, 1, val.data(), 0, kRows, 0, kRows, "t"), 0);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 7; ++j) want[rows[i] * kCols + j] += val[i * 7 + j];
  EXPECT_EQ(dst, want);
}

TEST(TileGatherScatter, ScatterAlongTheLastAxisLastWriteWins) {
  std::vector<float> dst(kRows * kCols, 0.0f);
  const int64_t tshape[] = {2, 3}, valid[] = {2, 3};
  const int64_t idx[] = {1, 1, 6, 0, 5, 0};
  const float val[] = {1, 2, 3, 4, 5, 6};
  ASSERT_EQ(pto::tscatter<0>(dst.data(), kStride, valid, 2, tshape, idx, 3, val, 1, kCols, 0, kCols, "t"), 0);
  EXPECT_EQ(dst[1], 2.0f);
  EXPECT_EQ(dst[6], 3.0f);
  EXPECT_EQ(dst[kCols + 0], 6.0f);
  EXPECT_EQ(dst[kCols + 5], 5.0f);
}

TEST(TileGatherScatter, AWindowedScatterLandsOnlyItsIndicesAndStillReportsBadOnes) {
  // The box is rows [2, 4) of the destination (a task's block): indices 2 and 3 land there at
  // positions 0 and 1, in order; 0 and 4 are another window's; 9 is outside [0, 5) and reported.
  std::vector<float> dst = Data(), want = Data();
  const int64_t tshape[] = {5, 7}, valid[] = {5, 7};
  const int64_t rows[] = {3, 0, 2, 3, 4};
  std::vector<float> val(35);
  for (size_t i = 0; i < val.size(); ++i) val[i] = 0.5f + static_cast<float>(i);
  float* box = dst.data() + 2 * kCols;
  ASSERT_EQ(pto::tscatter<1>(box, kStride, valid, 2, tshape, rows, 1, val.data(), 0, kRows, 2, 2, "t"), 0);
  for (int i = 0; i < 5; ++i)
    if (rows[i] == 2 || rows[i] == 3)
      for (int j = 0; j < 7; ++j) want[rows[i] * kCols + j] += val[i * 7 + j];
  EXPECT_EQ(dst, want);
  const int64_t bad[] = {2, 9, 3, 0, 0};
  char text[256] = {};
  EXPECT_EQ(pto::tscatter<1>(box, kStride, valid, 2, tshape, bad, 1, val.data(), 0, kRows, 2, 2, "@k: scatter"),
            PYPTO_STATUS_INDEX);
  EXPECT_EQ(pto::take_kernel_error(text, sizeof text), PYPTO_STATUS_INDEX);
  EXPECT_NE(std::string(text).find("index 9 on axis 0 is outside [0, 5)"), std::string::npos) << text;
}

TEST(TileGatherScatter, AnIndexOutsideTheAxisIsReportedAndNotWritten) {
  std::vector<float> dst(kRows * kCols, 0.0f);
  const int64_t tshape[] = {2, 7}, valid[] = {2, 7};
  const int64_t rows[] = {1, 5};  // 5 is outside [0, 5)
  std::vector<float> val(14, 1.0f);
  EXPECT_EQ(pto::tscatter<1>(dst.data(), kStride, valid, 2, tshape, rows, 1, val.data(), 0, kRows, 0, kRows, "@k: scatter"),
            PYPTO_STATUS_INDEX);
  char text[256] = {};
  EXPECT_EQ(pto::take_kernel_error(text, sizeof text), PYPTO_STATUS_INDEX);
  EXPECT_NE(std::string(text).find("index 5 on axis 0 is outside [0, 5)"), std::string::npos) << text;
  for (int j = 0; j < kCols; ++j) EXPECT_EQ(dst[kCols + j], 1.0f);  // the valid row was written
  for (int i = 0; i < kRows; ++i)
    if (i != 1)
      for (int j = 0; j < kCols; ++j) EXPECT_EQ(dst[i * kCols + j], 0.0f) << i << "," << j;
  const int32_t neg[] = {-1, 0, 0};
  const int64_t t1[] = {3}, v1[] = {3}, s1[] = {1};
  float out[3] = {};
  const float src[] = {1, 2, 3};
  EXPECT_EQ(pto::tgather(out, 1, t1, v1, src, s1, neg, 3, 0, 3, "@k: gather"), PYPTO_STATUS_INDEX);
  EXPECT_EQ(pto::take_kernel_error(text, sizeof text), PYPTO_STATUS_INDEX);
  EXPECT_NE(std::string(text).find("index -1 on axis 0"), std::string::npos) << text;
}

// texpand against its definition, dst[i] = src[the index of i with stretched dims at 0], for every
// pattern of stretched dims over ranks 0 to 4 (runs of stretched and copied dims, dims of one).
TEST(TileGatherScatter, ExpandMatchesTheElementwiseDefinitionForEveryStretchPattern) {
  const int64_t sizes[] = {3, 1, 4, 2};
  for (int rank = 0; rank <= 4; ++rank) {
    for (int mask = 0; mask < (1 << rank); ++mask) {
      int64_t dshape[4] = {}, sshape[4] = {};
      int64_t total = 1, stotal = 1;
      for (int d = 0; d < rank; ++d) {
        dshape[d] = sizes[d] + (d == rank - 1 ? 5 : 0);  // a longer innermost dim
        sshape[d] = (mask >> d) & 1 ? 1 : dshape[d];
        total *= dshape[d];
        stotal *= sshape[d];
      }
      std::vector<double> src(static_cast<size_t>(stotal)), dst(static_cast<size_t>(total), -1.0);
      for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<double>(i) + 0.25;
      pto::texpand(dst.data(), rank, dshape, src.data(), sshape);
      for (int64_t i = 0; i < total; ++i) {
        int64_t rem = i, off = 0, inner = 1;
        for (int d = rank - 1; d >= 0; --d) {
          if (sshape[d] != 1) off += (rem % dshape[d]) * inner;
          rem /= dshape[d];
          inner *= sshape[d];
        }
        ASSERT_EQ(dst[static_cast<size_t>(i)], src[static_cast<size_t>(off)]) << "rank " << rank << " mask " << mask << " i " << i;
      }
    }
  }
}

}  // namespace
}  // namespace pypto::codegen
