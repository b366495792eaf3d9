// Vectorisable float math (namespace vm).
// Part of codegen/tile_ops.h, which includes the parts in order (and nothing else does).

namespace pto {

/// Vectorisable float math. Each function is straight-line code (selects, no
/// branches, no calls), so a tile loop that applies it compiles to packed SIMD
/// instructions. Maximum errors over all finite floats, measured by
/// cpp_tests/codegen/vector_math_cases.inc (with and without FMA) against double-precision libm:
/// exp 1 ulp, log 1 ulp, tanh 2 ulp, erf 2 ulp (3 on targets without fused multiply-add),
/// rsqrt 1 ulp. inf, nan and denormal inputs and results behave as in libm. Other types use
/// libm (pto::fp).
namespace vm {

/// a * b + c: one fused instruction where the target has them; otherwise a multiply and an add
/// (std::fma would be a libm call there, which keeps the loops calling it scalar).
inline float fmadd(float a, float b, float c) {
#if PTO_HAS_FMA
  return fp::fma(a, b, c);
#else
  return a * b + c;
#endif
}

/// a * a - p exactly, for p = a * a rounded (|a| <= 4): one fused multiply-add, or Dekker's product
/// of a split into two 12-bit halves.
inline float square_error(float a, float p) {
#if PTO_HAS_FMA
  return fmadd(a, a, -p);
#else
  const float c = a * 4097.0f;
  const float ah = c - (c - a);
  const float al = a - ah;
  return ((ah * ah - p) + 2.0f * ah * al) + al * al;
#endif
}

inline float from_bits(int32_t i) { return __builtin_bit_cast(float, i); }
inline int32_t to_bits(float f) { return __builtin_bit_cast(int32_t, f); }

/// c0 + c1 x + c2 x^2 + ... by Horner's rule with fused multiply-adds (unrolled at compile time,
/// so loops calling it still vectorise).
inline float poly(float, float c0) { return c0; }
template <typename... C>
inline float poly(float x, float c0, C... c) {
  return fmadd(poly(x, c...), x, c0);
}

/// The same polynomial by Estrin's scheme: pairs c0 + c1 x, c2 + c3 x, ... are a polynomial in x^2,
/// and so on, so the chain of dependent operations is about log2(degree) fused multiply-adds long
/// instead of degree: a tile loop over a long polynomial is bound by throughput, not by latency.
/// Rounds differently from Horner's rule (the bounds above are measured for the form each function uses).
template <size_t N, size_t... I>
inline float estrin_pairs(float x, const float (&c)[N], std::index_sequence<I...>);
inline float estrin(float, float c0) { return c0; }
template <typename... C>
inline float estrin(float x, float c0, float c1, C... c) {
  if constexpr (sizeof...(C) == 0) {
    return fmadd(c1, x, c0);
  } else {
    const float pairs[] = {c0, c1, c...};
    constexpr size_t n = sizeof...(C) + 2;
    return estrin_pairs(x, pairs, std::make_index_sequence<(n + 1) / 2>{});
  }
}
template <size_t N, size_t... I>
inline float estrin_pairs(float x, const float (&c)[N], std::index_sequence<I...>) {  // one level
  return estrin(x * x, (2 * I + 1 < N ? fmadd(c[2 * I + 1 < N ? 2 * I + 1 : 0], x, c[2 * I]) : c[2 * I])...);
}

/// a clamped to [lo, hi] for a >= 0 (or nan, which gives hi; 0 <= lo <= hi): the bits of
/// non-negative floats order as the floats do, so two integer min/max instructions do it (a float
/// clamp written with selects compiles to compares and blends).
inline float clamp_nonneg(float a, float lo, float hi) {
  int32_t i = to_bits(a);
  const int32_t l = to_bits(lo), h = to_bits(hi);
  i = i < l ? l : i;
  return from_bits(i > h ? h : i);
}

/// 2^n for n in [-252, 254] as a product of two normal powers of two.
inline float pow2i_product(float y, int32_t n) {
  const int32_t n1 = n >> 1;
  const int32_t n2 = n - n1;
  // Shifted as unsigned: for a nan input `n` is garbage (the caller discards the result), and a
  // signed shift of it would be undefined.
  return y * from_bits(static_cast<int32_t>(static_cast<uint32_t>(n1 + 127) << 23)) *
         from_bits(static_cast<int32_t>(static_cast<uint32_t>(n2 + 127) << 23));
}

inline float exp(float x) {
  // exp(x) = 2^n * e^r with n = round(x / ln 2), |r| <= ln(2) / 2. Out of [-104, 88.72] the result
  // is chosen at the end (0 or inf: two selects, cheaper than clamping x first); nan propagates
  // through the arithmetic. The polynomial's chain of fused multiply-adds is the latency a tile
  // loop overlaps, so nothing else sits on it.
  const float t = fmadd(x, 1.44269504088896341f, 12582912.0f);  // rounds through 1.5 * 2^23
  const float n = t - 12582912.0f;
  // In unsigned arithmetic: out of range (the result is chosen below) t is any float.
  const int32_t ni = static_cast<int32_t>(static_cast<uint32_t>(to_bits(t)) - 0x4B400000u);
  float r = fmadd(n, -0.693359375f, x);
  r = fmadd(n, 2.12194440e-4f, r);
  const float p = poly(r, 1.0f, 1.0f, 0.5f, 1.0f / 6, 1.0f / 24, 1.0f / 120, 1.0f / 720, 1.0f / 5040);
  float y = pow2i_product(p, ni);
  y = x > 88.72283935546875f ? std::numeric_limits<float>::infinity() : y;
  return x < -104.0f ? 0.0f : y;
}

inline float log(float x) {
  // log(x) = e ln 2 + log(m), m in [sqrt(1/2), sqrt(2)), log(1 + f) = f - f^2/2 + f^3 P(f).
  const bool sub = x < 1.17549435e-38f;
  const int32_t i = to_bits(sub ? x * 8388608.0f : x);
  const int32_t mant = (i & 0x007fffff) | 0x3f800000;
  const int32_t big = mant > 0x3fb504f3 ? 1 : 0;  // m > sqrt(2): halve m
  const int32_t e = ((i >> 23) & 0xff) - (sub ? 150 : 127) + big;
  const float f = from_bits(mant - (big << 23)) - 1.0f;
  const float p = poly(f, 0.3333333134651184f, -0.2500030994415283f, 0.20000775158405304f, -0.16640795767307281f,
                           0.14222414791584015f, -0.13013280928134918f, 0.1256403625011444f, -0.07779280841350555f);
  const float f2 = f * f;
  const float fe = static_cast<float>(e);
  float y = fmadd(f2 * f, p, fmadd(-0.5f, f2, f));
  y = fmadd(fe, -2.12194440e-4f, y);
  y = fmadd(fe, 0.693359375f, y);
  // Zero, negative, inf and nan inputs give -inf, nan, inf and nan. The blend is done on bits:
  // a select would let the compiler move the polynomial under a branch, which stops vectorisation.
  const float inf = std::numeric_limits<float>::infinity();
  const float special = x == 0.0f ? -inf : (x > 0.0f ? x : std::numeric_limits<float>::quiet_NaN());
  const int32_t ok = -static_cast<int32_t>((x > 0.0f) & (x < inf));
  return from_bits((to_bits(y) & ok) | (to_bits(special) & ~ok));
}

inline float tanh(float x) {
  // |x| < 0.625: x + x^3 P(x^2); otherwise 1 - 2 / (e^(2|x|) + 1) with the sign of x.
  const float a = fp::fabs(x);
  const float s = x * x;
  const float p = poly(s, -0.3333333432674408f, 0.13333310186862946f, -0.053960226476192474f, 0.021774930879473686f,
                           -0.008359912782907486f, 0.002307977993041277f);
  const float small = fp::copysign(fmadd(x * s, p, x), x);  // keeps tanh(-0) = -0
  const float e = vm::exp(2.0f * a);
  const float large = fp::copysign(1.0f - 2.0f / (e + 1.0f), x);
  return a < 0.625f ? small : large;
}

/// erf(x) / x for |x| < 1, as a polynomial in s = x^2.
inline float erf_small(float s) {
  return poly(s, 1.128379225730896f, -0.3761262893676758f, 0.11283612251281738f, -0.026854807510972023f,
              0.0051900530233979225f, -0.000802435155492276f, 7.898201874922961e-05f);
}

inline float erf(float x) {
  // |x| < 1: x P(x^2). Otherwise 1 - erfc(|x|) with erfc(a) = e^(-a^2) Q(1/a) (Q fits erfcx on
  // [1, 4.1]; a^2 is split exactly into hi + lo), and 1 from |x| >= 4 (erfc(4) < 2^-25).
  const float a = fp::fabs(x);
  const float s = x * x;
  const float small = x * erf_small(s);
  const float ac = clamp_nonneg(a, 1.0f, 4.0f);
  const float u = 1.0f / ac;
  const float q = estrin(u, 2.197036701545585e-05f, 0.563798189163208f, 0.002330666407942772f, -0.28175947070121765f,
                           -0.08023510128259659f, 0.9229554533958435f, -1.558101773262024f, 1.4571022987365723f,
                           -0.8312594294548035f, 0.2721441090106964f, -0.03941330313682556f);
  const float hi = ac * ac;
  const float lo = square_error(ac, hi);
  const float erfc = vm::exp(-hi) * (1.0f - lo) * q;
  const float large = fp::copysign(a >= 4.0f ? 1.0f : 1.0f - erfc, x);
  const float y = a < 1.0f ? small : large;
  return x != x ? x : y;  // the clamp made a nan finite
}

/// GELU, x Phi(x), with Phi the standard normal CDF. For |x| / sqrt(2) < 1, Phi = (1 + erf(x / sqrt(2)))
/// / 2 with erf's polynomial above; otherwise Phi = 1 - erfc(a) / 2 (or erfc(a) / 2 for x < 0) with
/// erfc(a), a = |x| / sqrt(2), one polynomial in a on [1, 3.92] (absolute error below 1e-7; past
/// 3.92 erfc < 3e-8 is dropped): no exp and no division, half the work of 1 + erf(x / sqrt(2)).
/// Phi is within 6e-8 of the exact value, as close as 1 + erf(x / sqrt(2)) rounded to float is,
/// so |gelu(x) - x Phi(x)| <= 1.5e-7 |x| with the final product's rounding (1.21e-7 |x| measured by
/// cpp_tests/codegen/vector_math_test.cc).
inline float gelu(float x) {
  const float z = x * 0.70710678118654752440f;
  const float a = fp::fabs(z);
  const float small = fmadd(0.5f * z, erf_small(z * z), 0.5f);
  const float ac = clamp_nonneg(a, 1.0f, 3.92f);
  const float t = fmadd(ac, 0.6849315f, -1.6849315f);  // [1, 3.92] -> [-1, 1]
  const float e = estrin(t, 0.000503326883f, -0.00387806492f, 0.0139316022f, -0.0306010973f, 0.0450053737f,
                       -0.0450977907f, 0.0286989734f, -0.00652690465f, -0.00806570984f, 0.00908387918f,
                       -0.00228384067f, -0.00162961299f, 0.000859919412f);
  const float tail = a >= 3.92f ? 0.0f : 0.5f * e;
  const float large = x > 0.0f ? 1.0f - tail : tail;
  return x * (a < 1.0f ? small : large);
}

template <typename T> inline T exp(T x) { return fp::exp(x); }
template <typename T> inline T gelu(T x) { return T(0.5) * x * (T(1) + fp::erf(T(x * T(0.70710678118654752440)))); }
template <typename T> inline T log(T x) { return fp::log(x); }
template <typename T> inline T tanh(T x) { return fp::tanh(x); }
template <typename T> inline T erf(T x) { return fp::erf(x); }
// rsqrt needs no polynomial: sqrt and divide are packed instructions (1 ulp for float).
template <typename T> inline T rsqrt(T x) { return T(1) / fp::sqrt(x); }

}  // namespace vm

}  // namespace pto
