// Counter-based draws of tile_ops.h (pto::trandom): Philox4x32-10 against the known-answer vectors
// of its authors (Random123's kat_vectors), tiles of any shape cut from one stream, and the value
// conversions.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "runtime/pypto_abi.h"
// tile_ops.h is pasted after pypto_abi.h into generated code; include it the same way.
#include "codegen/tile_ops.h"

namespace pypto::codegen {
namespace {

/// The four words of Philox4x32-10 of counter (c0, c1, c2, c3) under key (k0, k1), through
/// draw_blocks(): (c0, c1) is the block number, (c2, c3) the stream's counter.
template <int Rounds = 10>
std::vector<uint32_t> Block(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1) {
  alignas(64) uint32_t buf[4 * pto::philox::kBlocksFor<4>];
  pto::philox::draw_blocks<4, Rounds>(buf, (uint64_t{k1} << 32) | k0, (uint64_t{c3} << 32) | c2,
                                      (uint64_t{c1} << 32) | c0);
  return std::vector<uint32_t>(buf, buf + 4);
}

TEST(TileRandom, PhiloxMatchesTheKnownAnswers) {
  EXPECT_EQ(Block(0, 0, 0, 0, 0, 0), (std::vector<uint32_t>{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(Block(0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu),
            (std::vector<uint32_t>{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(Block(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u, 0x299f31d0u),
            (std::vector<uint32_t>{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
  // Philox4x32-7 (PyPTO's uniform_impl(rounds=7)).
  EXPECT_EQ(Block<7>(0, 0, 0, 0, 0, 0), (std::vector<uint32_t>{0x5f6fb709u, 0x0d893f64u, 0x4f121f81u, 0x4f730a48u}));
  EXPECT_EQ(Block<7>(0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu),
            (std::vector<uint32_t>{0x5207ddc2u, 0x45165e59u, 0x4d8ee751u, 0x8c52f662u}));
  EXPECT_EQ(Block<7>(0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u, 0xa4093822u, 0x299f31d0u),
            (std::vector<uint32_t>{0x4dfccabau, 0x190a87f0u, 0xc47362bau, 0xb6b5242au}));
}

// A block base shifts the stream by whole blocks, wrapping modulo 2^64.
TEST(TileRandom, ABlockBaseShiftsTheStreamByBlocks) {
  constexpr int64_t N = 64;
  std::vector<float> whole(N + 8), shifted(N), wrapped(N);
  const int64_t lead[] = {0}, stride[] = {0};
  pto::trandom<float, N + 8, N + 8, false, 23, 7>(whole.data(), 3, 4, 0, 0, lead, stride);
  pto::trandom<float, N, N, false, 23, 7>(shifted.data(), 3, 4, 0, 0, lead, stride, 2);
  for (int64_t i = 0; i < N; ++i) EXPECT_EQ(shifted[i], whole[i + 8]) << i;
  // Block 2^64 - 1, then blocks 0, 1, ...
  pto::trandom<float, N, N, false, 23, 7>(wrapped.data(), 3, 4, 0, 0, lead, stride, ~uint64_t{0});
  for (int64_t i = 4; i < N; ++i) EXPECT_EQ(wrapped[i], whole[i - 4]) << i;
}

/// Stream elements [0, n) drawn as one 1-D tile.
template <int64_t N, bool Normal, int Bits>
std::vector<float> Stream(uint64_t key, uint64_t counter) {
  std::vector<float> out(N);
  const int64_t lead[] = {0}, stride[] = {0};
  pto::trandom<float, N, N, Normal, Bits>(out.data(), key, counter, 0, 0, lead, stride);
  return out;
}

TEST(TileRandom, UniformKeepsTheMantissaBitsOfEachDraw) {
  const std::vector<float> u = Stream<1000, false, 23>(77, 5);
  const std::vector<float> h = Stream<1000, false, 10>(77, 5);
  alignas(64) uint32_t buf[4 * pto::philox::kBlocksFor<1000>];
  const uint32_t* raw = pto::philox::draw<1000>(buf, 77, 5, 0);
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ(u[i], static_cast<float>(raw[i] & 0x7fffffu) / 8388608.0f) << i;
    EXPECT_EQ(h[i], static_cast<float>(raw[i] & 0x3ffu) / 1024.0f) << i;
    ASSERT_TRUE(u[i] >= 0.0f && u[i] < 1.0f);
  }
}

TEST(TileRandom, NormalIsBoxMullerOfTheUniformPairs) {
  const std::vector<float> u = Stream<1000, false, 23>(3, 9);
  const std::vector<float> z = Stream<999, true, 23>(3, 9);
  for (int p = 0; 2 * p < 999; ++p) {
    const double r = std::sqrt(-2.0 * std::log(std::max(static_cast<double>(u[2 * p]), 1e-7)));
    const double v = static_cast<double>(u[2 * p + 1] * 6.28318530717958647692f);
    EXPECT_NEAR(z[2 * p], std::sin(v) * r, 2e-6 * (1 + r)) << p;
    if (2 * p + 1 < 999) EXPECT_NEAR(z[2 * p + 1], std::cos(v) * r, 2e-6 * (1 + r)) << p;
  }
}

TEST(TileRandom, TilesOfAnyShapeCutTheSameStream) {
  // A [7, 13] tensor in [3, 5] tiles (tails included) equals the stream of its 91 elements.
  constexpr int64_t R = 7, C = 13, TR = 3, TC = 5;
  const std::vector<float> u = Stream<R * C, false, 23>(11, 2);
  const std::vector<float> z = Stream<R * C, true, 23>(11, 2);
  for (int64_t r0 = 0; r0 < R; r0 += TR)
    for (int64_t c0 = 0; c0 < C; c0 += TC) {
      float tu[TR * TC], tz[TR * TC];
      const int64_t lead[] = {TR}, stride[] = {C};
      pto::trandom<float, TR * TC, TC, false, 23>(tu, 11, 2, r0 * C + c0, 1, lead, stride);
      pto::trandom<float, TR * TC, TC, true, 23>(tz, 11, 2, r0 * C + c0, 1, lead, stride);
      for (int64_t i = 0; i < TR && r0 + i < R; ++i)
        for (int64_t j = 0; j < TC && c0 + j < C; ++j) {
          EXPECT_EQ(tu[i * TC + j], u[(r0 + i) * C + c0 + j]) << r0 + i << "," << c0 + j;
          EXPECT_EQ(tz[i * TC + j], z[(r0 + i) * C + c0 + j]) << r0 + i << "," << c0 + j;
        }
    }
}

}  // namespace
}  // namespace pypto::codegen
