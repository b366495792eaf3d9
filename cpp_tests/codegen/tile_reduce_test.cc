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

}  // namespace
}  // namespace pypto::codegen
