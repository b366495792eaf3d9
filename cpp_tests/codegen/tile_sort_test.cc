// Sorting of tile_ops.h (pto::tsort): both selection paths (the threshold scan when K * 16 <= N,
// the radix sort otherwise) against a stable sort, for floats with NaN, infinities and both zeros,
// for signed and 64-bit types, and over a valid part shorter than the row.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include "runtime/pypto_abi.h"
// tile_ops.h is pasted after pypto_abi.h into generated code; include it the same way.
#include "codegen/tile_ops.h"

namespace pypto::codegen {
namespace {

/// Orders a before b: NaN largest, -0 == +0.
template <typename T>
bool Before(T a, T b, bool desc) {
  if constexpr (std::is_floating_point<T>::value) {
    if (std::isnan(a) || std::isnan(b)) return desc ? (std::isnan(a) && !std::isnan(b)) : (!std::isnan(a) && std::isnan(b));
  }
  return desc ? a > b : a < b;
}

template <typename T, int64_t ROWS, int64_t N, int64_t K, bool DESC>
void Check(const std::vector<T>& a, int64_t valid) {
  std::vector<int32_t> got(ROWS * K, -1);
  pto::tsort<T, ROWS, N, K, DESC>(got.data(), a.data(), valid);
  const int64_t n = std::min(valid, N);
  for (int64_t r = 0; r < ROWS; ++r) {
    std::vector<int32_t> want(static_cast<size_t>(n));
    std::iota(want.begin(), want.end(), 0);
    const T* row = a.data() + r * N;
    std::stable_sort(want.begin(), want.end(), [&](int32_t x, int32_t y) { return Before(row[x], row[y], DESC); });
    for (int64_t j = 0; j < std::min(n, K); ++j)
      EXPECT_EQ(got[r * K + j], want[j]) << "N=" << N << " K=" << K << " DESC=" << DESC << " row " << r << " rank " << j;
  }
}

template <typename T>
std::vector<T> Values(int64_t count, int64_t distinct) {
  std::vector<T> v(static_cast<size_t>(count));
  uint64_t s = 12345;
  for (auto& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<T>(static_cast<int64_t>((s >> 33) % static_cast<uint64_t>(distinct)) - distinct / 2);
  }
  return v;
}

TEST(TileSortTest, BothPathsAgainstAStableSort) {
  auto f = Values<float>(3 * 200, 1000);
  Check<float, 3, 200, 5, true>(f, 200);     // threshold scan
  Check<float, 3, 200, 5, false>(f, 200);
  Check<float, 3, 200, 200, true>(f, 200);   // radix sort
  Check<float, 3, 200, 60, false>(f, 200);
  Check<float, 3, 200, 200, false>(f, 150);  // the valid part only
  auto ties = Values<int32_t>(2 * 300, 7);
  Check<int32_t, 2, 300, 8, true>(ties, 300);
  Check<int32_t, 2, 300, 300, false>(ties, 300);
  auto wide = Values<int64_t>(2 * 100, 1 << 20);
  Check<int64_t, 2, 100, 100, true>(wide, 100);
  Check<int64_t, 2, 100, 3, false>(wide, 100);
  auto d = Values<double>(2 * 64, 50);
  Check<double, 2, 64, 64, true>(d, 64);
}

TEST(TileSortTest, SpecialFloats) {
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<float> a = {1.0f, nan, -inf, 0.0f, -0.0f, inf, -nan, 2.0f, -0.0f, 0.0f, 1e-45f, -1e-45f,
                          3.0f, -3.0f, nan, 0.5f};
  for (int rep = 0; rep < 3; ++rep) a.insert(a.end(), a.begin(), a.begin() + 16);
  Check<float, 1, 64, 64, true>(a, 64);
  Check<float, 1, 64, 64, false>(a, 64);
  Check<float, 1, 64, 4, true>(a, 64);
  Check<float, 1, 64, 4, false>(a, 64);
}

}  // namespace
}  // namespace pypto::codegen
