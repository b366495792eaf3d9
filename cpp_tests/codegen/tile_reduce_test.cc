// Row reductions of tile_ops.h (pto::treduce with INNER = 1): interleaved lanes, tails shorter
// than a lane group, a valid count below the tile width, and NaN propagation through max.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "runtime/pypto_abi.h"
// tile_ops.h is pasted after pypto_abi.h into generated code; include it the same way.
#include "codegen/tile_ops.h"

namespace pypto::codegen {
namespace {

template <int64_t ROWS, int64_t RED>
void CheckRows(int64_t valid) {
  std::vector<float> a(ROWS * RED);
  for (int64_t i = 0; i < ROWS * RED; ++i) a[i] = std::sin(0.37f * static_cast<float>(i)) * 10.0f;
  float sum[ROWS], mx[ROWS];
  pto::treduce<pto::OpAdd, float, ROWS, RED, 1>(sum, a.data(), valid, 0.0f);
  pto::treduce<pto::OpMax, float, ROWS, RED, 1>(mx, a.data(), valid, pto::lowest<float>());
  for (int64_t r = 0; r < ROWS; ++r) {
    double s = 0;
    float m = pto::lowest<float>();
    for (int64_t c = 0; c < std::min(valid, RED); ++c) {
      s += a[r * RED + c];
      m = std::max(m, a[r * RED + c]);
    }
    EXPECT_NEAR(sum[r], s, 1e-4 * (1 + std::fabs(s))) << "RED=" << RED << " valid=" << valid << " row " << r;
    EXPECT_EQ(mx[r], m) << "RED=" << RED << " valid=" << valid << " row " << r;
  }
}

TEST(TileReduceTest, RowsOfEveryLengthClass) {
  CheckRows<3, 1>(1);
  CheckRows<3, 15>(15);
  CheckRows<3, 16>(16);
  CheckRows<3, 17>(17);
  CheckRows<2, 100>(100);
  CheckRows<2, 100>(37);   // valid part only
  CheckRows<2, 64>(1000);  // valid beyond the tile is clamped
  CheckRows<4, 4096>(4096);
  CheckRows<4, 4096>(0);
  // Rows long enough for the independent sets of partial results, with and without a partial group
  // of sets and a scalar tail.
  CheckRows<2, 64>(64);
  CheckRows<2, 80>(80);
  CheckRows<2, 113>(113);
  CheckRows<3, 200>(150);
}

TEST(TileReduceTest, MaxPropagatesNaNFromAnyLane) {
  for (int64_t at : {0, 5, 15, 16, 40, 47}) {
    std::vector<float> a(48, 1.0f);
    a[at] = std::numeric_limits<float>::quiet_NaN();
    float m;
    pto::treduce<pto::OpMax, float, 1, 48, 1>(&m, a.data(), 48, pto::lowest<float>());
    EXPECT_TRUE(std::isnan(m)) << "NaN at " << at;
  }
}

TEST(TileReduceTest, MaxPropagatesNaNFromEverySetOfPartialResults) {
  for (int64_t at : {0, 17, 35, 63, 64, 100, 127, 129}) {
    std::vector<float> a(130, 1.0f);
    a[at] = std::numeric_limits<float>::quiet_NaN();
    float m;
    pto::treduce<pto::OpMax, float, 1, 130, 1>(&m, a.data(), 130, pto::lowest<float>());
    EXPECT_TRUE(std::isnan(m)) << "NaN at " << at;
  }
}

TEST(TileReduceTest, MinPropagatesNaNAndVectorLanesHoldOtherTypes) {
  std::vector<float> f(40, 2.0f);
  f[33] = std::numeric_limits<float>::quiet_NaN();
  float m;
  pto::treduce<pto::OpMin, float, 1, 40, 1>(&m, f.data(), 40, pto::highest<float>());
  EXPECT_TRUE(std::isnan(m));
  // int32, int64 and double take the vector-lane path too; sums, extremes and a tail of 3.
  std::vector<int32_t> i32(35);
  std::vector<int64_t> i64(35);
  std::vector<double> f64(35);
  for (int k = 0; k < 35; ++k) {
    i32[k] = (k * 37) % 23 - 11;
    i64[k] = (int64_t{k} << 33) - 5;
    f64[k] = 0.5 * k - 3.0;
  }
  int32_t s32, mn32;
  int64_t mx64;
  double s64;
  pto::treduce<pto::OpAdd, int32_t, 1, 35, 1>(&s32, i32.data(), 35, 0);
  pto::treduce<pto::OpMin, int32_t, 1, 35, 1>(&mn32, i32.data(), 35, std::numeric_limits<int32_t>::max());
  pto::treduce<pto::OpMax, int64_t, 1, 35, 1>(&mx64, i64.data(), 35, std::numeric_limits<int64_t>::min());
  pto::treduce<pto::OpAdd, double, 1, 35, 1>(&s64, f64.data(), 35, 0.0);
  int32_t want_s = 0, want_mn = 1 << 30;
  double want_d = 0;
  for (int k = 0; k < 35; ++k) {
    want_s += i32[k];
    want_mn = std::min(want_mn, i32[k]);
    want_d += f64[k];
  }
  EXPECT_EQ(s32, want_s);
  EXPECT_EQ(mn32, want_mn);
  EXPECT_EQ(mx64, i64[34]);
  EXPECT_DOUBLE_EQ(s64, want_d);
}

}  // namespace
}  // namespace pypto::codegen
