// Accuracy of the vectorisable float math in tile_ops.h (pto::vm) against double-precision libm,
// over every 127th float bit pattern plus dense sweeps around each branch and threshold, and the
// special values (inf, nan, signed zeros, denormals).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>

#include "runtime/pypto_abi.h"
// tile_ops.h is pasted after pypto_abi.h into generated code; include it the same way.
#include "codegen/tile_ops.h"

namespace pypto::codegen {
namespace {

using FloatFn = std::function<float(float)>;
using RefFn = std::function<double(double)>;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kDenormMin = std::numeric_limits<float>::denorm_min();

// Floats mapped to integers so that adjacent floats differ by one (both signs, through zero).
int64_t Ordinal(float f) {
  int32_t i;
  std::memcpy(&i, &f, sizeof i);
  return i >= 0 ? int64_t{i} : int64_t{INT32_MIN} - int64_t{i};
}

// Distance in ulps between `got` and the correctly rounded reference; 0 when both are the same
// nan/inf, huge when only one is.
int64_t UlpError(float got, double ref) {
  const float want = static_cast<float>(ref);
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) == std::isnan(got) ? 0 : INT64_MAX;
  if (std::isinf(want) || std::isinf(got)) return want == got ? 0 : INT64_MAX;
  return std::llabs(Ordinal(got) - Ordinal(want));
}

struct Worst {
  int64_t ulps = 0;
  float at = 0;
};

void Check(float x, const FloatFn& f, const RefFn& ref, Worst& worst) {
  const int64_t e = UlpError(f(x), ref(static_cast<double>(x)));
  if (e > worst.ulps) worst = Worst{e, x};
}

// Every `step`-th bit pattern of both signs, plus `dense` consecutive floats on each side of each
// point in `edges`.
Worst Sweep(const FloatFn& f, const RefFn& ref, uint32_t step, std::initializer_list<float> edges, int dense = 4096) {
  Worst worst;
  for (uint64_t bits = 0; bits <= 0xffffffffull; bits += step) {
    float x;
    const uint32_t b = static_cast<uint32_t>(bits);
    std::memcpy(&x, &b, sizeof x);
    Check(x, f, ref, worst);
  }
  for (float edge : edges) {
    for (float sign : {1.0f, -1.0f}) {
      float lo = sign * edge, hi = sign * edge;
      for (int i = 0; i < dense; ++i) {
        Check(lo, f, ref, worst);
        Check(hi, f, ref, worst);
        lo = std::nextafter(lo, -kInf);
        hi = std::nextafter(hi, kInf);
      }
    }
  }
  return worst;
}

void ExpectBound(const char* name, const Worst& w, int64_t bound) {
  std::cout << name << ": max error " << w.ulps << " ulp at " << w.at << "\n";
  EXPECT_LE(w.ulps, bound) << name << " at x = " << w.at;
}

TEST(VectorMathTest, ExpWithinOneUlp) {
  Worst w = Sweep([](float x) { return pto::vm::exp(x); }, [](double x) { return std::exp(x); }, 127,
                  {0.0f, 0.34657359f, 1.0f, 10.0f, 88.72283f, 87.33654f, 103.97208f, 100.0f, 0.5f, 20.0f});
  ExpectBound("exp", w, 1);
  EXPECT_EQ(pto::vm::exp(kInf), kInf);
  EXPECT_EQ(pto::vm::exp(-kInf), 0.0f);
  EXPECT_EQ(pto::vm::exp(89.0f), kInf);
  EXPECT_EQ(pto::vm::exp(-200.0f), 0.0f);
  EXPECT_EQ(pto::vm::exp(0.0f), 1.0f);
  EXPECT_EQ(pto::vm::exp(-0.0f), 1.0f);
  EXPECT_EQ(pto::vm::exp(kDenormMin), 1.0f);
  EXPECT_TRUE(std::isnan(pto::vm::exp(kNaN)));
  // Results in the denormal range.
  EXPECT_EQ(pto::vm::exp(-103.0f), static_cast<float>(std::exp(-103.0)));
  EXPECT_GT(pto::vm::exp(-103.0f), 0.0f);
}

TEST(VectorMathTest, LogWithinOneUlp) {
  Worst w = Sweep([](float x) { return pto::vm::log(x); }, [](double x) { return std::log(x); }, 127,
                  {1.0f, 1.41421356f, 0.70710678f, 2.0f, 0.5f, std::numeric_limits<float>::min()});
  ExpectBound("log", w, 1);
  EXPECT_EQ(pto::vm::log(kInf), kInf);
  EXPECT_EQ(pto::vm::log(0.0f), -kInf);
  EXPECT_EQ(pto::vm::log(-0.0f), -kInf);
  EXPECT_EQ(pto::vm::log(1.0f), 0.0f);
  EXPECT_TRUE(std::isnan(pto::vm::log(-1.0f)));
  EXPECT_TRUE(std::isnan(pto::vm::log(-kInf)));
  EXPECT_TRUE(std::isnan(pto::vm::log(kNaN)));
  EXPECT_EQ(pto::vm::log(kDenormMin), static_cast<float>(std::log(static_cast<double>(kDenormMin))));
}

TEST(VectorMathTest, TanhWithinTwoUlps) {
  Worst w = Sweep([](float x) { return pto::vm::tanh(x); }, [](double x) { return std::tanh(x); }, 127,
                  {0.0f, 0.625f, 1.0f, 9.0f, 1e-3f});
  ExpectBound("tanh", w, 2);
  EXPECT_EQ(pto::vm::tanh(kInf), 1.0f);
  EXPECT_EQ(pto::vm::tanh(-kInf), -1.0f);
  EXPECT_EQ(pto::vm::tanh(0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(pto::vm::tanh(-0.0f)));
  EXPECT_EQ(pto::vm::tanh(kDenormMin), kDenormMin);
  EXPECT_TRUE(std::isnan(pto::vm::tanh(kNaN)));
}

TEST(VectorMathTest, ErfWithinTwoUlps) {
  Worst w = Sweep([](float x) { return pto::vm::erf(x); }, [](double x) { return std::erf(x); }, 127,
                  {0.0f, 1.0f, 4.0f, 2.0f, 0.5f, 3.0f});
  ExpectBound("erf", w, 2);
  EXPECT_EQ(pto::vm::erf(kInf), 1.0f);
  EXPECT_EQ(pto::vm::erf(-kInf), -1.0f);
  EXPECT_EQ(pto::vm::erf(0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(pto::vm::erf(-0.0f)));
  EXPECT_EQ(pto::vm::erf(-kDenormMin), static_cast<float>(std::erf(-static_cast<double>(kDenormMin))));
  EXPECT_TRUE(std::isnan(pto::vm::erf(kNaN)));
}

TEST(VectorMathTest, RsqrtWithinOneUlp) {
  Worst w = Sweep([](float x) { return pto::vm::rsqrt(x); }, [](double x) { return 1.0 / std::sqrt(x); }, 127,
                  {1.0f, 4.0f, std::numeric_limits<float>::min()});
  ExpectBound("rsqrt", w, 1);
  EXPECT_EQ(pto::vm::rsqrt(kInf), 0.0f);
  EXPECT_EQ(pto::vm::rsqrt(0.0f), kInf);
  EXPECT_EQ(pto::vm::rsqrt(-0.0f), -kInf);
  EXPECT_TRUE(std::isnan(pto::vm::rsqrt(-1.0f)));
  EXPECT_TRUE(std::isfinite(pto::vm::rsqrt(kDenormMin)));
}

TEST(VectorMathTest, GeluIsWithinItsAbsoluteBound) {
  // |gelu(x) - x Phi(x)| <= 1.5e-7 |x| (plus the denormal spacing) over every 61st float (all
  // magnitudes), densely over [-8, 8] and around the branch points |x| = sqrt(2) and 3.92 sqrt(2).
  auto exact = [](double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); };
  double worst = 0;
  float at = 0;
  auto check = [&](float x) {
    const float got = pto::vm::gelu(x);
    if (!std::isfinite(x)) return;
    // Less the spacing of denormal results, which no float result can beat.
    const double miss = std::max(0.0, std::fabs(static_cast<double>(got) - exact(x)) - kDenormMin);
    const double err = miss / std::max(std::fabs(static_cast<double>(x)), 1e-300);
    if (err > worst) worst = err, at = x;
  };
  for (uint64_t bits = 0; bits <= 0xffffffffull; bits += 61) {
    float x;
    const uint32_t b = static_cast<uint32_t>(bits);
    std::memcpy(&x, &b, sizeof x);
    check(x);
  }
  for (int i = -800000; i <= 800000; ++i) check(static_cast<float>(i) * 1e-5f);
  for (float edge : {1.41421356f, 5.54371716f})
    for (float sign : {1.0f, -1.0f}) {
      float lo = sign * edge, hi = sign * edge;
      for (int i = 0; i < 4096; ++i, lo = std::nextafter(lo, -kInf), hi = std::nextafter(hi, kInf)) check(lo), check(hi);
    }
  std::cout << "gelu: max error " << worst << " |x| at " << at << "\n";
  EXPECT_LE(worst, 1.5e-7) << "at x = " << at;
  // Special values as 0.5 x (1 + erf(x / sqrt 2)) gives them.
  EXPECT_EQ(pto::vm::gelu(kInf), kInf);
  EXPECT_TRUE(std::isnan(pto::vm::gelu(-kInf)));
  EXPECT_TRUE(std::isnan(pto::vm::gelu(kNaN)));
  EXPECT_EQ(pto::vm::gelu(0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(pto::vm::gelu(-0.0f)));
  EXPECT_EQ(pto::vm::gelu(kDenormMin), 0.0f);  // x / 2 rounds to zero
  EXPECT_EQ(pto::vm::gelu(-100.0f), -0.0f);
  EXPECT_EQ(pto::vm::gelu(100.0f), 100.0f);
}

TEST(VectorMathTest, TileLoopsMatchScalarCalls) {
  // The tile loops (vectorised when built with -march=native) give the same values as scalar calls.
  alignas(64) float in[1024], out[1024];
  for (int i = 0; i < 1024; ++i) in[i] = -20.0f + 0.039f * static_cast<float>(i);
  pto::tunary<pto::FnExp, float, 1024>(out, in);
  for (int i = 0; i < 1024; ++i) ASSERT_EQ(out[i], pto::vm::exp(in[i])) << i;
  pto::tunary<pto::FnGelu, float, 1024>(out, in);
  for (int i = 0; i < 1024; ++i) ASSERT_EQ(out[i], pto::vm::gelu(in[i])) << i;
}

}  // namespace
}  // namespace pypto::codegen
