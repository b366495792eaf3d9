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

// Integer tiles: exact products (modulo 2^32 for an int32 result) on every path: the int16-pair
// micro-kernel (x86 variants: int8 and int16 operands, and int32 ones whose values fit in int16),
// the float micro-kernel (every partial sum within 2^24) and the integer loop, with L0 blocks,
// remainder rows and columns and an odd K. The values drawn are in [lo, hi]; `edges` also puts
// lo and hi in whole rows of a and columns of b (the largest products).
template <typename T, typename S, int64_t M, int64_t K, int64_t N, int64_t M0 = M, int64_t K0 = K, int64_t N0 = N>
void CheckIntMatmul(int32_t lo, int32_t hi, bool edges = false) {
  std::mt19937 rng(static_cast<unsigned>(M * 7 + K * 3 + N + hi));
  std::uniform_int_distribution<int32_t> dist(lo, hi);
  std::vector<S> a(M * K), b(K * N);
  std::vector<T> c(M * N), start(M * N);
  for (auto& v : a) v = static_cast<S>(dist(rng));
  for (auto& v : b) v = static_cast<S>(dist(rng));
  for (auto& v : start) v = static_cast<T>(dist(rng));
  if (edges) {
    for (int64_t k = 0; k < K; ++k) {
      a[k] = static_cast<S>(lo);
      a[(M - 1) * K + k] = static_cast<S>(hi);
      b[k * N] = static_cast<S>(lo);
      b[k * N + N - 1] = static_cast<S>(lo);
    }
  }
  for (bool acc : {false, true}) {
    c = start;
    if (acc) {
      pto::tmatmul<true, T, M, K, N, M0, K0, N0>(c.data(), a.data(), b.data());
    } else {
      pto::tmatmul<false, T, M, K, N, M0, K0, N0>(c.data(), a.data(), b.data());
    }
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        int64_t want = acc ? start[i * N + j] : 0;
        for (int64_t k = 0; k < K; ++k) want += static_cast<int64_t>(a[i * K + k]) * b[k * N + j];
        ASSERT_EQ(c[i * N + j], static_cast<T>(static_cast<uint64_t>(want)))
            << "M=" << M << " K=" << K << " N=" << N << " values in [" << lo << ", " << hi << "] acc=" << acc
            << " at (" << i << ", " << j << ")";
      }
    }
  }
}

TEST(MatmulKernelTest, IntegerTilesAreExactOnEveryPath) {
  CheckIntMatmul<int32_t, int32_t, 16, 64, 2 * pto::kMatmulCols>(-128, 127);  // int8 values in int32 tiles
  CheckIntMatmul<int32_t, int32_t, 13, 1024, 21>(-128, 127);                   // K 1024, a column remainder
  CheckIntMatmul<int32_t, int32_t, 24, 512, 48, 8, 256, 16>(-128, 127);        // L0 blocks accumulate in int32
  CheckIntMatmul<int64_t, int64_t, 20, 64, 33, 10, 32, 11>(-128, 127);         // int64 accumulators alike
  CheckIntMatmul<int32_t, int32_t, 9, 40, 17>(-3000, 3000);                    // int16 values
  CheckIntMatmul<int32_t, int32_t, 9, 40, 17>(-70000, 70000);                  // past int16: another path
  CheckIntMatmul<int64_t, int64_t, 5, 2048, 3>(-128, 127);                     // 2048 x 2^14 > 2^24: the loop
}

TEST(MatmulKernelTest, NarrowOperandsGiveExactInt32) {
  CheckIntMatmul<int32_t, int8_t, 32, 128, 4 * pto::kVecFloats>(-128, 127, true);   // whole register blocks
  CheckIntMatmul<int32_t, int8_t, 37, 301, 45>(-128, 127, true);                    // odd K, row and column tails
  CheckIntMatmul<int32_t, int8_t, 7, 3, 3>(-128, 127, true);                        // narrower than one vector
  CheckIntMatmul<int32_t, int8_t, 24, 512, 48, 8, 256, 16>(-128, 127, true);        // L0 blocks
  CheckIntMatmul<int32_t, int8_t, 6, 4096, 16>(-128, 127, true);                    // sums past 2^24
  CheckIntMatmul<int32_t, int16_t, 12, 63, 40>(-32768, 32767, true);                // int16: sums wrap mod 2^32
}

}  // namespace
}  // namespace pypto::codegen
