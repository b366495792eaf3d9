// The fp16 storage conversions of tile_ops.h (pto::cvt to and from pto::f16): bit-exact against the
// compiler's own _Float16 conversions (round to nearest even) for every fp16 value, a sweep of
// float bit patterns and doubles near fp16 rounding boundaries; NaN stays a quiet NaN.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "runtime/pypto_abi.h"
// tile_ops.h is pasted after pypto_abi.h into generated code; include it the same way.
#include "codegen/tile_ops.h"

namespace pypto::codegen {
namespace {

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

#ifdef __FLT16_MAX__
uint16_t half_bits(_Float16 h) {
  uint16_t u;
  std::memcpy(&u, &h, 2);
  return u;
}

TEST(ConvertTest, EveryHalfToFloat) {
  for (uint32_t i = 0; i < 65536; ++i) {
    const uint16_t h = static_cast<uint16_t>(i);
    _Float16 ref;
    std::memcpy(&ref, &h, 2);
    const float got = pto::cvt<float>(pto::f16{h}), want = static_cast<float>(ref);
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << i;
      ASSERT_EQ(std::signbit(got), std::signbit(want)) << std::hex << i;
    } else {
      ASSERT_EQ(bits_of(got), bits_of(want)) << std::hex << i;
    }
  }
}

TEST(ConvertTest, FloatToHalfMatchesTheCompiler) {
  // Every pattern below 2^20 (zero, float subnormals), then a stride through all 2^32 patterns
  // (both signs, the fp16 subnormal and normal ranges, overflow, inf, NaN).
  for (uint64_t i = 0; i < (uint64_t(1) << 32); i += (i < (uint64_t(1) << 20) ? 1 : 251)) {
    const float f = float_of(static_cast<uint32_t>(i));
    const uint16_t got = pto::cvt<pto::f16>(f).bits;
    if (std::isnan(f)) {
      ASSERT_EQ(got & 0x7e00u, 0x7e00u) << std::hex << i;  // quiet NaN
      ASSERT_EQ(got >> 15, i >> 31) << std::hex << i;
      continue;
    }
    ASSERT_EQ(got, half_bits(static_cast<_Float16>(f))) << std::hex << i;
  }
}

TEST(ConvertTest, DoubleToHalfRoundsOnce) {
  // Doubles just off the midpoint between two fp16 values: rounding to float first would land on
  // the midpoint and round to even.
  for (uint32_t h = 0x0001; h < 0x7bff; h += 7) {
    const double lo = static_cast<double>(pto::cvt<float>(pto::f16{static_cast<uint16_t>(h)}));
    const double hi = static_cast<double>(pto::cvt<float>(pto::f16{static_cast<uint16_t>(h + 1)}));
    for (double d : {0.5 * (lo + hi) * (1 + 1e-12), 0.5 * (lo + hi) * (1 - 1e-12), 0.5 * (lo + hi), -lo, lo}) {
      ASSERT_EQ(pto::cvt<pto::f16>(d).bits, half_bits(static_cast<_Float16>(d))) << d;
    }
  }
}
#endif

TEST(ConvertTest, HalfSpecialValues) {
  EXPECT_EQ(pto::cvt<pto::f16>(0.0f).bits, 0x0000);
  EXPECT_EQ(pto::cvt<pto::f16>(-0.0f).bits, 0x8000);
  EXPECT_EQ(pto::cvt<pto::f16>(65504.0f).bits, 0x7bff);
  EXPECT_EQ(pto::cvt<pto::f16>(65520.0f).bits, 0x7c00);  // the midpoint to 2^16 rounds up: inf
  EXPECT_EQ(pto::cvt<pto::f16>(-INFINITY).bits, 0xfc00);
  EXPECT_EQ(pto::cvt<pto::f16>(5.9604644775390625e-8f).bits, 0x0001);  // the smallest subnormal
  EXPECT_EQ(pto::cvt<pto::f16>(2.98e-8f).bits, 0x0000);               // below half of it
  EXPECT_EQ(pto::cvt<float>(pto::f16{0x3c00}), 1.0f);
  EXPECT_EQ(pto::cvt<float>(pto::f16{0x0001}), 5.9604644775390625e-8f);
  EXPECT_TRUE(std::isinf(pto::cvt<float>(pto::f16{0x7c00})));
  EXPECT_TRUE(std::isnan(pto::cvt<float>(pto::f16{0x7e01})));
  EXPECT_EQ(pto::cvt<int32_t>(pto::f16{0xc500}), -5);  // -5.0 through float
  EXPECT_EQ(pto::cvt<pto::f16>(int32_t{70000}).bits, 0x7c00);
}

}  // namespace
}  // namespace pypto::codegen
