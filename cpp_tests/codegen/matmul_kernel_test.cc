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

// c = start, then c = or += a @ b.
template <typename T, int64_t M, int64_t K, int64_t N, int64_t M0, int64_t K0, int64_t N0>
void RunMatmul(bool acc, std::vector<T>& c, const std::vector<T>& start, const std::vector<T>& a,
               const std::vector<T>& b) {
  c = start;
  if (acc) {
    pto::tmatmul<true, T, M, K, N, M0, K0, N0>(c.data(), a.data(), b.data());
  } else {
    pto::tmatmul<false, T, M, K, N, M0, K0, N0>(c.data(), a.data(), b.data());
  }
}

template <typename T, int64_t M, int64_t K, int64_t N, int64_t M0 = M, int64_t K0 = K, int64_t N0 = N>
void CheckMatmul() {
  std::mt19937 rng(static_cast<unsigned>(M * 131 + K * 17 + N));
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  alignas(64) std::vector<T> a(M * K), b(K * N), c(M * N), start(M * N);
  for (auto& v : a) v = static_cast<T>(dist(rng));
  for (auto& v : b) v = static_cast<T>(dist(rng));
  for (auto& v : start) v = static_cast<T>(dist(rng));
  for (bool acc : {false, true}) {
    RunMatmul<T, M, K, N, M0, K0, N0>(acc, c, start, a, b);
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

// int32 tiles: exact integer products whether they go through the float micro-kernel (every partial
// sum within 2^24, as int8 inputs give) or the integer loop (larger values), with the L0 blocks.
template <typename T, int64_t M, int64_t K, int64_t N, int64_t M0 = M, int64_t K0 = K, int64_t N0 = N>
void CheckIntMatmul(int32_t lo, int32_t hi) {
  std::mt19937 rng(static_cast<unsigned>(M * 7 + K * 3 + N + hi));
  std::uniform_int_distribution<int32_t> dist(lo, hi);
  std::vector<T> a(M * K), b(K * N), c(M * N), start(M * N);
  for (auto& v : a) v = dist(rng);
  for (auto& v : b) v = dist(rng);
  for (auto& v : start) v = dist(rng);
  for (bool acc : {false, true}) {
    RunMatmul<T, M, K, N, M0, K0, N0>(acc, c, start, a, b);
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        int64_t want = acc ? start[i * N + j] : 0;
        for (int64_t k = 0; k < K; ++k) want += static_cast<int64_t>(a[i * K + k]) * b[k * N + j];
        ASSERT_EQ(c[i * N + j], want) << "M=" << M << " K=" << K << " N=" << N << " values in ["
                                                             << lo << ", " << hi << "] acc=" << acc << " at (" << i
                                                             << ", " << j << ")";
      }
    }
  }
}

TEST(MatmulKernelTest, IntegerTilesAreExactOnBothPaths) {
  CheckIntMatmul<int32_t, 16, 64, 2 * pto::kMatmulCols>(-128, 127);  // int8 values: the float path
  CheckIntMatmul<int32_t, 13, 1024, 21>(-128, 127);                   // K 1024 of int8: partial sums to 2^24
  CheckIntMatmul<int32_t, 24, 512, 48, 8, 256, 16>(-128, 127);        // L0 blocks accumulate in int32
  CheckIntMatmul<int64_t, 20, 64, 33, 10, 32, 11>(-128, 127);         // int64 accumulators alike
  CheckIntMatmul<int32_t, 9, 40, 17>(-3000, 3000);                    // larger values: the integer loop
  CheckIntMatmul<int64_t, 5, 2048, 3>(-128, 127);                     // 2048 x 2^14 > 2^24: the integer loop
}

}  // namespace
}  // namespace pypto::codegen
