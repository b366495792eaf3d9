// The narrow storage conversions of tile_ops.h (tile_ops/convert.h): FP8 E4M3 and E5M2, FP4 E2M1
// and E1M2, INT4 and E8M0, each against a reference written independently of it: decoding from the
// format's definition (sign, biased exponent, mantissa) and encoding as the nearest representable
// value found by search over every code (ties to the even code), with each format's rule past its
// largest value. Encoding is checked over a sweep of all float bit patterns, every midpoint
// between neighbouring values and the values themselves.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "runtime/pypto_abi.h"
// tile_ops.h is pasted after pypto_abi.h into generated code; include it the same way.
#include "codegen/tile_ops.h"
#include "../sanitized.h"

namespace pypto::codegen {
namespace {

float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

/// The value of FP8 code c by the format's definition.
double fp8_value(int E, int M, bool ieee, int c) {
  const int bias = (1 << (E - 1)) - 1, exp = (c >> M) & ((1 << E) - 1), mant = c & ((1 << M) - 1);
  const double sign = (c & 0x80) ? -1.0 : 1.0;
  if (exp == (1 << E) - 1) {
    if (ieee) return mant == 0 ? sign * INFINITY : NAN;
    if (mant == (1 << M) - 1) return NAN;
  }
  if (exp == 0) return sign * std::ldexp(mant, 1 - bias - M);
  return sign * std::ldexp(mant + (1 << M), exp - bias - M);
}

/// The code nearest to f among `values` (indexed by code magnitude, NaN entries skipped; ties to
/// the even code), for |f| no larger than the largest value (callers saturate first).
int nearest(const std::vector<double>& values, double a) {
  int best = -1;
  double dist = 0;
  for (int c = 0; c < static_cast<int>(values.size()); ++c) {
    if (std::isnan(values[c]) || std::isinf(values[c])) continue;
    const double d = std::fabs(values[c] - a);
    if (best < 0 || d < dist || (d == dist && (c & 1) == 0)) best = c, dist = d;
  }
  return best;
}

struct Fp8Format {
  int E, M;
  bool ieee;
  uint8_t (*encode)(float);
  float (*decode)(uint8_t);
};

const Fp8Format kFp8[] = {
    {4, 3, false, [](float f) { return pto::cvt<pto::f8e4m3>(f).bits; },
     [](uint8_t b) { return pto::cvt<float>(pto::f8e4m3{b}); }},
    {5, 2, true, [](float f) { return pto::cvt<pto::f8e5m2>(f).bits; },
     [](uint8_t b) { return pto::cvt<float>(pto::f8e5m2{b}); }},
};

/// The expected FP8 code of f: NaN keeps its sign (0x7f); an IEEE format gives infinity from the
/// midpoint between its largest value and the next power of the exponent; the other saturates.
uint8_t fp8_expected(const Fp8Format& fmt, const std::vector<double>& values, float f) {
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  if (std::isnan(f)) return sign | 0x7f;
  const double a = std::fabs(static_cast<double>(f));
  double max = 0;
  int max_code = 0;
  for (int c = 0; c < 0x80; ++c)
    if (std::isfinite(values[c]) && values[c] > max) max = values[c], max_code = c;
  if (a >= max) {
    const double ulp = std::ldexp(1.0, std::ilogb(max) - fmt.M);
    if (fmt.ieee && a >= max + ulp / 2) return sign | static_cast<uint8_t>(((1 << fmt.E) - 1) << fmt.M);
    return sign | static_cast<uint8_t>(max_code);
  }
  return sign | static_cast<uint8_t>(nearest(values, a));
}

/// Floats to encode: every 4093rd bit pattern (sparser under the sanitizers), each representable value and each midpoint between
/// neighbours with its two float neighbours, both signs.
std::vector<float> probes(const std::vector<double>& values) {
  std::vector<float> out;
  for (uint64_t u = 0; u <= 0xffffffffull; u += test::ThinnedStride(4093)) out.push_back(float_of(static_cast<uint32_t>(u)));
  std::vector<double> sorted;
  for (double v : values)
    if (std::isfinite(v) && v >= 0) sorted.push_back(v);
  std::sort(sorted.begin(), sorted.end());
  for (size_t i = 0; i < sorted.size(); ++i) {
    std::vector<double> points = {sorted[i]};
    if (i + 1 < sorted.size()) points.push_back((sorted[i] + sorted[i + 1]) / 2);
    for (double p : points) {
      const float f = static_cast<float>(p);
      for (float g : {f, std::nextafter(f, 0.0f), std::nextafter(f, INFINITY)}) {
        out.push_back(g);
        out.push_back(-g);
      }
    }
  }
  for (float f : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 1e30f, -1e30f, 1e-45f, -1e-45f}) out.push_back(f);
  return out;
}

TEST(NarrowConvertTest, Fp8DecodesEveryCode) {
  for (const Fp8Format& fmt : kFp8) {
    for (int c = 0; c < 256; ++c) {
      const double want = fp8_value(fmt.E, fmt.M, fmt.ieee, c);
      const float got = fmt.decode(static_cast<uint8_t>(c));
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << "E" << fmt.E << "M" << fmt.M << " code " << c;
      } else {
        EXPECT_EQ(got, static_cast<float>(want)) << "E" << fmt.E << "M" << fmt.M << " code " << c;
        EXPECT_EQ(std::signbit(got), (c & 0x80) != 0) << "E" << fmt.E << "M" << fmt.M << " code " << c;
      }
    }
  }
}

TEST(NarrowConvertTest, Fp8EncodesToTheNearestValue) {
  for (const Fp8Format& fmt : kFp8) {
    std::vector<double> values(256);
    for (int c = 0; c < 256; ++c) values[c] = fp8_value(fmt.E, fmt.M, fmt.ieee, c);
    std::vector<double> magnitudes(values.begin(), values.begin() + 0x80);
    int failures = 0;
    for (float f : probes(magnitudes)) {
      const uint8_t want = fp8_expected(fmt, magnitudes, f), got = fmt.encode(f);
      if (got != want && ++failures <= 5)
        ADD_FAILURE() << "E" << fmt.E << "M" << fmt.M << " encode(" << f << ") = " << int(got) << ", want " << int(want);
    }
    EXPECT_EQ(failures, 0);
  }
}

TEST(NarrowConvertTest, Fp4EncodesToTheNearestValueAndSaturates) {
  const std::vector<double> e2m1 = {0, 0.5, 1, 1.5, 2, 3, 4, 6}, e1m2 = {0, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75};
  for (bool is_e2m1 : {true, false}) {
    const std::vector<double>& v = is_e2m1 ? e2m1 : e1m2;
    for (int c = 0; c < 16; ++c) {
      const float got = is_e2m1 ? pto::cvt<float>(pto::f4e2m1{static_cast<uint8_t>(c)})
                                : pto::cvt<float>(pto::f4e1m2{static_cast<uint8_t>(c)});
      EXPECT_EQ(got, static_cast<float>((c & 8) ? -v[c & 7] : v[c & 7])) << "code " << c;
    }
    int failures = 0;
    for (float f : probes(v)) {
      const uint8_t sign = std::signbit(f) ? 8 : 0;
      const double a = std::fabs(static_cast<double>(f));
      const uint8_t want = std::isnan(f) || a >= v[7] ? sign | 7 : sign | nearest(v, a);
      const uint8_t got = is_e2m1 ? pto::cvt<pto::f4e2m1>(f).bits : pto::cvt<pto::f4e1m2>(f).bits;
      if (got != want && ++failures <= 5)
        ADD_FAILURE() << (is_e2m1 ? "E2M1" : "E1M2") << " encode(" << f << ") = " << int(got) << ", want " << int(want);
    }
    EXPECT_EQ(failures, 0);
  }
}

TEST(NarrowConvertTest, Int4TruncatesAndWrapsLikeAWiderInteger) {
  int failures = 0;
  for (uint64_t u = 0; u <= 0xffffffffull; u += 127) {
    const float f = float_of(static_cast<uint32_t>(u));
    uint8_t want = 0;
    if (!std::isnan(f)) {
      const double c = std::fmax(-9.2e18, std::fmin(9.2e18, static_cast<double>(f)));
      want = static_cast<uint8_t>(static_cast<uint64_t>(static_cast<int64_t>(c)) & 0xf);
    }
    const uint8_t got = pto::cvt<pto::i4>(f).bits;
    if (got != want && ++failures <= 5) ADD_FAILURE() << "int4(" << f << ") = " << int(got) << ", want " << int(want);
  }
  EXPECT_EQ(failures, 0);
  for (int v = -8; v < 8; ++v) EXPECT_EQ(pto::cvt<float>(pto::cvt<pto::i4>(static_cast<float>(v))), static_cast<float>(v));
  EXPECT_EQ(pto::cvt<pto::i4>(-1.5f).bits, 0xf);  // -1
  EXPECT_EQ(pto::cvt<pto::i4>(17.9f).bits, 1);    // 17 wraps to 1
}

TEST(NarrowConvertTest, E8m0KeepsTheRoundedExponent) {
  auto enc = [](float f) { return int(pto::cvt<pto::f8e8m0>(f).bits); };
  EXPECT_EQ(enc(1.0f), 127);
  EXPECT_EQ(enc(1.4f), 127);
  EXPECT_EQ(enc(1.5f), 128);  // a tie rounds up to the next power
  EXPECT_EQ(enc(3.0f), 129);
  EXPECT_EQ(enc(-0.25f), 125);  // the sign is dropped
  EXPECT_EQ(enc(0.0f), 0);
  EXPECT_EQ(enc(INFINITY), 0xff);
  EXPECT_EQ(enc(NAN), 0xff);
  EXPECT_EQ(enc(std::numeric_limits<float>::max()), 0xff);  // rounds past 2^127
  for (int b = 0; b < 255; ++b) {
    const float v = pto::cvt<float>(pto::f8e8m0{static_cast<uint8_t>(b)});
    EXPECT_EQ(v, std::ldexp(1.0f, b - 127)) << b;
    EXPECT_EQ(enc(v), b) << b;
  }
  EXPECT_TRUE(std::isnan(pto::cvt<float>(pto::f8e8m0{0xff})));
}

}  // namespace
}  // namespace pypto::codegen
