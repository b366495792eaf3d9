// Scans of tile_ops.h (pto::tscan): along the last axis (a SIMD vector at a time, with a scalar
// tail), along a middle and the first axis (whole rows at a time), starting from a carry.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "runtime/pypto_abi.h"
// tile_ops.h is pasted after pypto_abi.h into generated code; include it the same way.
#include "codegen/tile_ops.h"

namespace pypto::codegen {
namespace {

/// The scan of a [OUTER, LEN, INNER] tile against a sequential one in double.
template <typename Op, typename T, int64_t OUTER, int64_t LEN, int64_t INNER>
void Check(double tol) {
  std::vector<T> a(OUTER * LEN * INNER), dst(a.size()), carry(OUTER * INNER);
  const bool prod = std::is_same<Op, pto::OpMul>::value;
  for (size_t i = 0; i < a.size(); ++i) {
    const double v = prod ? 1.0 + 0.01 * std::sin(0.7 * static_cast<double>(i)) : 10.0 * std::sin(0.37 * static_cast<double>(i));
    a[i] = std::is_integral<T>::value ? static_cast<T>(prod ? 1 + (i % 3 == 0) : static_cast<int64_t>(i % 7) - 3)
                                      : static_cast<T>(v);
  }
  for (size_t i = 0; i < carry.size(); ++i) carry[i] = static_cast<T>(prod ? 2 : static_cast<int64_t>(i) + 1);
  pto::tscan<Op, T, OUTER, LEN, INNER>(dst.data(), a.data(), carry.data(), static_cast<T>(prod ? 1 : 0));
  for (int64_t o = 0; o < OUTER; ++o) {
    for (int64_t j = 0; j < INNER; ++j) {
      double run = static_cast<double>(carry[o * INNER + j]);
      for (int64_t i = 0; i < LEN; ++i) {
        const size_t at = static_cast<size_t>((o * LEN + i) * INNER + j);
        run = prod ? run * static_cast<double>(a[at]) : run + static_cast<double>(a[at]);
        EXPECT_NEAR(static_cast<double>(dst[at]), run, tol * (1.0 + std::fabs(run)))
            << "OUTER=" << OUTER << " LEN=" << LEN << " INNER=" << INNER << " at " << o << ", " << i << ", " << j;
      }
    }
  }
}

TEST(TileScanTest, AlongTheLastAxisOfEveryLengthClass) {
  Check<pto::OpAdd, float, 3, 1, 1>(1e-6);
  Check<pto::OpAdd, float, 3, 7, 1>(1e-6);
  Check<pto::OpAdd, float, 3, 8, 1>(1e-6);
  Check<pto::OpAdd, float, 3, 16, 1>(1e-6);
  Check<pto::OpAdd, float, 2, 33, 1>(1e-5);
  Check<pto::OpAdd, float, 2, 1000, 1>(1e-4);
  Check<pto::OpAdd, double, 2, 37, 1>(1e-13);
  Check<pto::OpAdd, int64_t, 2, 45, 1>(0);
  Check<pto::OpMul, float, 2, 50, 1>(1e-5);
  Check<pto::OpMul, double, 2, 17, 1>(1e-13);
  Check<pto::OpMul, int64_t, 2, 40, 1>(0);
}

TEST(TileScanTest, AlongAMiddleAndTheFirstAxis) {
  Check<pto::OpAdd, float, 1, 20, 33>(1e-5);
  Check<pto::OpAdd, float, 3, 9, 5>(1e-5);
  Check<pto::OpMul, double, 2, 6, 4>(1e-13);
  Check<pto::OpAdd, int64_t, 4, 5, 3>(0);
}

TEST(TileScanTest, NaNAndInfinityPropagateFromAnyLane) {
  for (int64_t at : {0, 3, 7, 8, 12, 19}) {
    std::vector<float> a(20, 1.0f), dst(20);
    a[at] = std::nanf("");
    float carry = 0.0f;
    pto::tscan<pto::OpAdd, float, 1, 20, 1>(dst.data(), a.data(), &carry, 0.0f);
    for (int64_t i = 0; i < 20; ++i) EXPECT_EQ(std::isnan(dst[i]), i >= at) << "NaN at " << at << ", lane " << i;
  }
}

}  // namespace
}  // namespace pypto::codegen
