// The tile matmul (pto::tmatmul): the register-blocked float micro-kernel, its edge tiles (rows
// that do not fill a register block, columns that do not fill a vector) and the accumulate form,
// against a double-precision reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "runtime/pypto_abi.h"
// tile_ops.h is pasted after pypto_abi.h into generated code; include it the same way.
#include "codegen/tile_ops.h"

namespace pypto::codegen {
namespace {

template <typename T, int64_t M, int64_t K, int64_t N, int64_t M0 = M, int64_t K0 = K, int64_t N0 = N>
void CheckMatmul() {
  std::mt19937 rng(static_cast<unsigned>(M * 131 + K * 17 + N));
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  alignas(64) std::vector<T> a(M * K), b(K * N), c(M * N), start(M * N);
  for (auto& v : a) v = static_cast<T>(dist(rng));
  for (auto& v : b) v = static_cast<T>(dist(rng));
  for (auto& v : start) v = static_cast<T>(dist(rng));
  for (bool acc : {false, true}) {
    c = start;
    if (acc) {
      pto::tmatmul<true, T, M, K, N, M0, K0, N0>(c.data(), a.data(), b.data());
    } else {
      pto::tmatmul<false, T, M, K, N, M0, K0, N0>(c.data(), a.data(), b.data());
    }
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        double want = acc ? static_cast<double>(start[i * N + j]) : 0.0;
        for (int64_t k = 0; k < K; ++k) want += static_cast<double>(a[i * K + k]) * static_cast<double>(b[k * N + j]);
        ASSERT_NEAR(static_cast<double>(c[i * N + j]), want, 1e-5 * (K + 1))
            << "M=" << M << " K=" << K << " N=" << N << " L0=" << M0 << "x" << K0 << "x" << N0 << " acc=" << acc
            << " at (" << i << ", " << j << ")";
      }
    }
  }
}

TEST(MatmulKernelTest, FullRegisterBlocks) {
  CheckMatmul<float, 16, 64, 2 * pto::kMatmulCols>();
  CheckMatmul<float, 32, 32, pto::kMatmulCols>();
}

TEST(MatmulKernelTest, RowRemainders) {
  CheckMatmul<float, 1, 8, pto::kMatmulCols>();
  CheckMatmul<float, 7, 5, pto::kMatmulCols>();
  CheckMatmul<float, 9, 16, pto::kMatmulCols>();
  CheckMatmul<float, 13, 3, 2 * pto::kMatmulCols>();
  // Rows split into balanced register blocks (32 with blocks of at most 6: two of 6, four of 5).
  CheckMatmul<float, 30, 8, pto::kMatmulCols>();
  CheckMatmul<float, 32, 8, pto::kMatmulCols>();
  CheckMatmul<float, 47, 4, pto::kMatmulCols>();
}

TEST(MatmulKernelTest, ColumnRemainders) {
  // A single-vector block after the full blocks, then scalar columns.
  CheckMatmul<float, 8, 16, pto::kMatmulCols + pto::kVecFloats>();
  CheckMatmul<float, 8, 16, pto::kMatmulCols + pto::kVecFloats + 3>();
  CheckMatmul<float, 5, 7, pto::kVecFloats - 1>();
  CheckMatmul<float, 3, 1, 1>();
  CheckMatmul<float, 17, 33, 70>();
}

TEST(MatmulKernelTest, L0BlocksInsideTheTile) {
  // k blocks accumulate into the result; m and n blocks, and blocks narrower than a register block.
  CheckMatmul<float, 32, 64, 2 * pto::kMatmulCols, 16, 16, pto::kMatmulCols>();
  CheckMatmul<float, 24, 12, 48, 8, 4, 16>();
  CheckMatmul<float, 18, 9, 30, 6, 3, 10>();
  CheckMatmul<float, 16, 32, 16, 16, 8, 16>();
  CheckMatmul<double, 12, 10, 12, 4, 5, 6>();
}

TEST(MatmulKernelTest, OtherTypesUseTheGenericLoop) {
  CheckMatmul<double, 9, 17, 33>();
  CheckMatmul<double, 8, 8, pto::kMatmulCols>();
}

}  // namespace
}  // namespace pypto::codegen
