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
/// (std::fma would be a libm call there, which keeps the loops calling it scalar). In the type of `a`.
template <typename T> struct same_type { using type = T; };
template <typename T>
inline T fmadd(T a, typename same_type<T>::type b, typename same_type<T>::type c) {
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

/// log(x) for finite x > 0 (normal or denormal) as fe ln 2 + lm: the exponent fe (a float integer)
/// and lm = log(m), m in [sqrt(1/2), sqrt(2)) (|lm| <= 0.35), so log2 and log10 scale the parts
/// separately (exact powers of two give exact integers).
inline void log_parts(float x, float& fe, float& lm) {
  // log(1 + f) = f - f^2/2 + f^3 P(f). Denormals are scaled by 2^23 first. The bits of x less those
  // of sqrt(1/2), shifted, are the exponent e with m = x / 2^e in [sqrt(1/2), sqrt(2)): one integer
  // subtraction, no compare and select.
  const bool sub = x < 1.17549435e-38f;
  const uint32_t i = static_cast<uint32_t>(to_bits(sub ? x * 8388608.0f : x));
  const uint32_t t = i - 0x3f3504f3u;  // for x <= 0, inf or nan, garbage that log_special replaces
  const int32_t e = (static_cast<int32_t>(t) >> 23) - (sub ? 23 : 0);
  const float f = from_bits(static_cast<int32_t>(i - (t & 0xff800000u))) - 1.0f;
  const float p = poly(f, 0.3333333134651184f, -0.2500030994415283f, 0.20000775158405304f, -0.16640795767307281f,
                           0.14222414791584015f, -0.13013280928134918f, 0.1256403625011444f, -0.07779280841350555f);
  const float f2 = f * f;
  fe = static_cast<float>(e);
  lm = fmadd(f2 * f, p, fmadd(-0.5f, f2, f));
}

/// The value of a logarithm for inputs outside (0, inf): zero gives -inf, inf gives inf, negative
/// and nan inputs give nan. The blend is done on bits: a select would let the compiler move the
/// polynomial under a branch, which stops vectorisation.
inline float log_special(float x, float y) {
  const float inf = std::numeric_limits<float>::infinity();
  const float special = x == 0.0f ? -inf : (x > 0.0f ? x : std::numeric_limits<float>::quiet_NaN());
  const int32_t ok = -static_cast<int32_t>((x > 0.0f) & (x < inf));
  return from_bits((to_bits(y) & ok) | (to_bits(special) & ~ok));
}

inline float log(float x) {
  // log(x) = e ln 2 + log(m), m in [sqrt(1/2), sqrt(2)); ln 2 in two parts so that e ln 2 is exact.
  float fe, lm;
  log_parts(x, fe, lm);
  float y = fmadd(fe, -2.12194440e-4f, lm);
  y = fmadd(fe, 0.693359375f, y);
  return log_special(x, y);
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

inline float log2(float x) {
  // e + log(m) log2(e), log2(e) in two parts; powers of two give their exponent exactly.
  float fe, lm;
  log_parts(x, fe, lm);
  return log_special(x, fmadd(lm, 1.4426950216293335f, fmadd(lm, 1.925963033500011e-08f, fe)));
}

inline float log10(float x) {
  // e log10(2) + log(m) log10(e), both constants in two parts (e log10(2)'s high part is exact).
  float fe, lm;
  log_parts(x, fe, lm);
  const float low = fmadd(lm, -1.0103049952192578e-08f, fe * 4.605039066518657e-06f);
  return log_special(x, fmadd(fe, 0.301025390625f, fmadd(lm, 0.4342944920063019f, low)));
}

inline float log1p(float x) {
  // log(u) for u = 1 + x rounded, corrected by the rounding error of u to first order:
  // log1p(x) = log(u) + (x - (u - 1)) / u. u is never denormal (it is 0 or at least 2^-24), so the
  // exponent comes from one integer subtraction: the bits of u less those of sqrt(1/2), shifted,
  // give e with m = u / 2^e in [sqrt(1/2), sqrt(2)); no selects. Where u rounds to 1 the correction
  // is x itself, exactly. The result has the sign of x (ORing it in keeps log1p(-0) = -0).
  const float u = 1.0f + x;
  const uint32_t i = static_cast<uint32_t>(to_bits(u));
  const uint32_t t = i - 0x3f3504f3u;  // for u <= 0, inf or nan, garbage that log_special replaces
  const float fe = static_cast<float>(static_cast<int32_t>(t) >> 23);
  const float f = from_bits(static_cast<int32_t>(i - (t & 0xff800000u))) - 1.0f;
  const float p = poly(f, 0.3333333134651184f, -0.2500030994415283f, 0.20000775158405304f, -0.16640795767307281f,
                       0.14222414791584015f, -0.13013280928134918f, 0.1256403625011444f, -0.07779280841350555f);
  const float f2 = f * f;
  const float c = (x - (u - 1.0f)) / u;
  const float lm = fmadd(-0.5f, f2, f) + fmadd(f2 * f, p, c);
  const float y = log_special(u, fmadd(fe, 0.693359375f, fmadd(fe, -2.12194440e-4f, lm)));
  return from_bits(to_bits(y) | (to_bits(x) & static_cast<int32_t>(0x80000000u)));
}

/// e^(a - ln 2) = e^a / 2 for a up to 89.42 (where e^a alone overflows): ln 2's high part is exact
/// to subtract, its low part a factor applied as one fused multiply-add.
inline float half_exp(float a) {
  const float e = vm::exp(a - 0.693359375f);
  return fmadd(e, 2.1221695e-04f, e);
}

inline float sinh(float x) {
  // |x| < 1: the odd Taylor series to x^13; |x| < 9: (e^a - e^-a) / 2; beyond, e^a / 2 alone.
  const float a = fp::fabs(x);
  const float s = x * x;
  const float small = fmadd(x * s, poly(s, 1.0f / 6, 1.0f / 120, 1.0f / 5040, 1.0f / 362880, 1.0f / 39916800,
                                        1.0f / 6227020800.0f), x);
  const float e = vm::exp(a);
  const float mid = 0.5f * e - 0.5f / e;
  const float large = fp::copysign(a < 9.0f ? mid : half_exp(a), x);
  return a < 1.0f ? small : large;
}

inline float cosh(float x) {
  // (e^a + e^-a) / 2 below 9; e^a / 2 beyond.
  const float a = fp::fabs(x);
  const float e = vm::exp(a);
  return a < 9.0f ? fmadd(0.5f, e, 0.5f / e) : half_exp(a);
}

inline float asinh(float x) {
  // log1p(a + a^2 / (1 + sqrt(1 + a^2))) (no cancellation near 0); log(a) + ln 2 from 2^12 on,
  // where a^2 + 1 rounds to a^2 (and would overflow later).
  const float a = fp::fabs(x);
  const float s = a * a;
  const float near = log1p(a + s / (1.0f + fp::sqrt(1.0f + s)));
  const float far = log(a) + 0.6931471824645996f;
  return fp::copysign(a < 4096.0f ? near : far, x);
}

inline float acosh(float x) {
  // Below 2: log1p(t + sqrt(2t + t^2)), t = x - 1 exact; below 2^12: log(x + sqrt(x^2 - 1));
  // beyond, log(x) + ln 2. Below 1 (and nan): nan.
  const float t = x - 1.0f;
  const float near = log1p(t + fp::sqrt(fmadd(t, t, 2.0f * t)));
  const float mid = log(x + fp::sqrt(fmadd(x, x, -1.0f)));
  const float far = log(x) + 0.6931471824645996f;
  const float y = x < 2.0f ? near : (x < 4096.0f ? mid : far);
  return x >= 1.0f ? y : std::numeric_limits<float>::quiet_NaN();
}

inline float atanh(float x) {
  // log1p(2a / (1 - a)) / 2 with the sign of x: 1 gives inf, beyond 1 nan.
  const float a = fp::fabs(x);
  return fp::copysign(0.5f * log1p((a + a) / (1.0f - a)), x);
}

inline float cbrt(float x) {
  // A first guess from the exponent bits divided by three (within 4%), then three Newton steps
  // y -= (y - a / y^2) / 3; denormals are scaled by 2^24 first (and the result by 2^-8).
  const float a = fp::fabs(x);
  const bool sub = a < 1.17549435e-38f;
  const float as = sub ? a * 16777216.0f : a;
  const float third = static_cast<float>(to_bits(as)) * (1.0f / 3);
  float y = from_bits(static_cast<int32_t>(third) + 709958130);
  for (int i = 0; i < 3; ++i) y = fmadd(y - as / (y * y), -1.0f / 3, y);
  y = sub ? y * 0.00390625f : y;
  // 0, inf and nan are their own cube roots.
  const bool self = !(a > 0.0f) | (a == std::numeric_limits<float>::infinity());
  return self ? x : fp::copysign(y, x);
}

/// atan(t) for |t| <= tan(pi / 8): t + t z P(z), z = t^2 (relative error 2.2e-8 before rounding).
inline float atan_kernel(float t) {
  const float z = t * t;
  return fmadd(t * z, poly(z, -0.3333294987678528f, 0.19977709650993347f, -0.1387767493724823f, 0.08053711801767349f),
               t);
}

inline float atan(float x) {
  // |x| > tan(3 pi / 8): pi/2 + atan(-1/a); |x| > tan(pi / 8): pi/4 + atan((a - 1) / (a + 1)); the
  // multiples of pi/4 carry their rounding error as a second part.
  const float a = fp::fabs(x);
  const bool far = a > 2.414213562373095f, mid = a > 0.41421356237309503f;
  const float t = far ? -1.0f / a : (mid ? (a - 1.0f) / (a + 1.0f) : a);
  const float hi = far ? 1.5707963705062866f : (mid ? 0.7853981852531433f : 0.0f);
  const float lo = far ? -4.371138828673793e-08f : (mid ? -2.1855694143368964e-08f : 0.0f);
  return fp::copysign(hi + (atan_kernel(t) + lo), x);
}

/// asin(s) for 0 <= s <= 1/2: s + s z P(z), z = s^2 (relative error 5.8e-9 before rounding).
inline float asin_kernel(float s, float z) {
  return fmadd(s * z, poly(z, 0.16666752099990845f, 0.07495297491550446f, 0.04547037556767464f, 0.024179525673389435f,
                           0.04216628521680832f), s);
}

/// 2 asin(sqrt((1 - a) / 2)) for 1/2 < a <= 1: asin(a) = pi/2 - it, acos(a) = it.
inline float twice_asin_of_half_rest(float a) {
  const float z = 0.5f - 0.5f * a;
  return 2.0f * asin_kernel(fp::sqrt(z), z);
}

inline float asin(float x) {
  // |x| <= 1/2: the kernel; otherwise pi/2 - 2 asin(sqrt((1 - a) / 2)). Beyond 1: nan.
  const float a = fp::fabs(x);
  const float far = 1.5707963705062866f - (twice_asin_of_half_rest(a) + 4.371138828673793e-08f);
  const float y = a <= 0.5f ? asin_kernel(a, a * a) : far;
  return a <= 1.0f ? fp::copysign(y, x) : std::numeric_limits<float>::quiet_NaN() + x;
}

inline float acos(float x) {
  // |x| <= 1/2: pi/2 - asin(x); x > 1/2: 2 asin(sqrt((1 - x) / 2)); x < -1/2: pi - that of -x.
  const float a = fp::fabs(x);
  const float twice = twice_asin_of_half_rest(a);
  const float near = 1.5707963705062866f - (asin_kernel(x, x * x) + 4.371138828673793e-08f);
  const float neg = 3.1415927410125732f - (twice + 8.742277657347586e-08f);
  const float y = a <= 0.5f ? near : (x > 0.0f ? twice : neg);
  return a <= 1.0f ? y : std::numeric_limits<float>::quiet_NaN() + x;
}

/// 2/pi in 24-bit chunks: 2/pi = sum over k of kTwoOverPi[k] 2^(-24 (k + 1)) (240 bits).
constexpr int32_t kTwoOverPi[10] = {10680707, 7228996, 1387004, 2578385, 16069853,
                                    12639074, 9804092, 4427841, 16666979, 11263675};

/// Chunk k0 + J of 2/pi as a double, for k0 = the number of the masks m[0..3] (all ones or zero,
/// in order) that are set: a sum of masked differences, since a table load indexed per element
/// (or a select chain, which the compiler turns into one) is a gather and keeps the loop scalar.
template <int J>
inline double two_over_pi_chunk(const int32_t (&m)[4]) {
  int32_t c = kTwoOverPi[J];
  for (int i = 0; i < 4; ++i) c += m[i] & (kTwoOverPi[J + i + 1] - kTwoOverPi[J + i]);
  return static_cast<double>(c);
}

/// v - 4 round(v / 4), exactly, for |v| < 2^52 (the rounding by the 1.5 * 2^52 shifter).
inline double minus_multiple_of_4(double v) {
  const double q = (v * 0.25 + 6755399441055744.0) - 6755399441055744.0;
  return v - 4.0 * q;
}

/// a = n pi/2 + r for any finite float a >= 0, by the chunks of 2/pi that matter at a's exponent
/// (Payne and Hanek's reduction, in double and branch-free): a = m 2^s with m the 24-bit
/// significand, and a (2/pi) mod 4 = the sum of m c_k 2^(s - 24 (k + 1)) over the chunks from the
/// first that is not a multiple of 4, six chunks in all (the rest is below 2^-95); each product of
/// two 24-bit integers is exact in double. Gives r in double (|r| <= pi/4 + a little) and n mod 4.
inline double reduce_half_pi(float a, int32_t& quadrant) {
  const int32_t bits = to_bits(a);
  const int32_t e = bits >> 23;
  const int32_t mant = bits & 0x7fffff;
  const double m = static_cast<double>(e == 0 ? mant : (mant | 0x800000));
  const int32_t s = (e == 0 ? 1 : e) - 150;
  // k0, the first chunk that is not a multiple of 4 here, is the number of these thresholds s reaches.
  const int32_t past[4] = {-(s >= 26), -(s >= 50), -(s >= 74), -(s >= 98)};
  const int32_t k0 = -(past[0] + past[1] + past[2] + past[3]);
  const int64_t t0 = s - 24 * (k0 + 1);                               // >= -173: the scales stay normal
  const double scale = __builtin_bit_cast(double, static_cast<uint64_t>(t0 + 1023) << 52);
  const double v0 = minus_multiple_of_4(m * two_over_pi_chunk<0>(past) * scale);
  const double v1 = minus_multiple_of_4(m * two_over_pi_chunk<1>(past) * (scale * 0x1p-24));
  const double v2 = m * two_over_pi_chunk<2>(past) * (scale * 0x1p-48);
  const double v3 = m * two_over_pi_chunk<3>(past) * (scale * 0x1p-72);
  const double v4 = m * two_over_pi_chunk<4>(past) * (scale * 0x1p-96);
  const double v5 = m * two_over_pi_chunk<5>(past) * (scale * 0x1p-120);
  const double hi = v0 + v1;  // exact: both lie on the grid of v1's last bit, below 2^3
  const double n = (hi + v2 + 6755399441055744.0) - 6755399441055744.0;
  // Smallest terms last: each partial sum is about the fraction less the terms still to come, so
  // its rounding stays far below the fraction (which is no smaller than 2^-32 for any float).
  const double f = ((((hi - n) + v2) + v3) + v4) + v5;
  quadrant = static_cast<int32_t>(n) & 3;
  return f * 1.5707963267948966;
}

/// sin(r) and cos(r) for |r| <= pi/4 in double (Taylor series; relative error below 1e-11).
inline double sin_kernel(double r) {
  const double z = r * r;
  const double p4 = fmadd(fmadd(-1.0 / 39916800, z, 1.0 / 362880), z, -1.0 / 5040);
  const double p = fmadd(fmadd(p4, z, 1.0 / 120), z, -1.0 / 6);
  return fmadd(r * z, p, r);
}
inline double cos_kernel(double r) {
  const double z = r * r;
  const double p4 = fmadd(fmadd(1.0 / 479001600, z, -1.0 / 3628800), z, 1.0 / 40320);
  const double p = fmadd(fmadd(p4, z, -1.0 / 720), z, 1.0 / 24);
  return fmadd(z * z, p, fmadd(-0.5, z, 1.0));
}

/// The float with magnitude y and the sign of s XOR the sign of x (the odd functions' symmetry).
inline float with_sign_of(float y, float x) {
  return from_bits(to_bits(y) ^ (to_bits(x) & static_cast<int32_t>(0x80000000u)));
}

/// a = n pi/2 + r for 0 <= a < 2^28 (the fast forms' domain, below); r in double, n mod 4. pi/2 in
/// two parts suffices there: a 25-bit head (n times it is exact for n < 2^28) and the rest in
/// double, 78 bits in all.
inline double reduce_half_pi_fast(float a, int32_t& quadrant) {
  const double d = a;
  const double n = (d * 0.63661977236758134308 + 6755399441055744.0) - 6755399441055744.0;
  quadrant = static_cast<int32_t>(__builtin_bit_cast(int64_t, n + 6755399441055744.0)) & 3;
  const double head = 1.57079631090164184570;     // pi/2 to 25 bits: n * head is exact
  const double tail = 1.58932547735281966916e-08;  // pi/2 - head
  return fmadd(-n, tail, d - n * head);
}

/// sin, cos and tan of a finite x by `Reduce` (|x| = n pi/2 + r, r in double, n mod 4): the
/// kernels in double, one rounding to float at the end (within 1 ulp).
using HalfPiReduction = double (*)(float, int32_t&);
template <HalfPiReduction Reduce>
inline float sin_by(float x) {
  int32_t q;
  const double r = Reduce(fp::fabs(x), q);
  const double v = (q & 1) ? cos_kernel(r) : sin_kernel(r);
  return with_sign_of(static_cast<float>((q & 2) ? -v : v), x);
}
template <HalfPiReduction Reduce>
inline float cos_by(float x) {
  int32_t q;
  const double r = Reduce(fp::fabs(x), q);
  const double v = (q & 1) ? sin_kernel(r) : cos_kernel(r);
  return static_cast<float>(((q + 1) & 2) ? -v : v);
}
template <HalfPiReduction Reduce>
inline float tan_by(float x) {
  int32_t q;
  const double r = Reduce(fp::fabs(x), q);
  const double sr = sin_kernel(r), cr = cos_kernel(r);
  return with_sign_of(static_cast<float>((q & 1) ? -cr / sr : sr / cr), x);
}

/// sin, cos and tan of any float: Payne and Hanek's reduction (above); inf and nan give nan.
inline float sin(float x) {
  const float y = sin_by<reduce_half_pi>(x);
  return fp::fabs(x) < std::numeric_limits<float>::infinity() ? y : x - x;
}
inline float cos(float x) {
  const float y = cos_by<reduce_half_pi>(x);
  return fp::fabs(x) < std::numeric_limits<float>::infinity() ? y : x - x;
}
inline float tan(float x) {
  const float y = tan_by<reduce_half_pi>(x);
  return fp::fabs(x) < std::numeric_limits<float>::infinity() ? y : x - x;
}

/// The fast forms of sin, cos and tan (pass fast_forms): exact over a narrower domain only, where
/// the argument reduction needs no Payne-Hanek step. Outside it (and for inf and nan) the
/// `*_fast_outside` check is 1 and the fused run redoes its strip with the full forms above. Within
/// 1 ulp, as the full forms (measured over every float of the domain when written; the tests sweep it).
/// tan, and sin and cos on targets without fused multiply-add: reduce_half_pi_fast below 2^28.
constexpr float kTanFastBound = 268435456.0f;  // 2^28
inline int tan_fast_outside(float x) { return fp::fabs(x) < kTanFastBound ? 0 : 1; }
inline float tan_fast(float x) { return tan_by<reduce_half_pi_fast>(x); }

#if PTO_HAS_FMA
/// sin and cos with fused multiply-add: all in float, eight lanes to a 256-bit vector. Below 2^17,
/// a = n pi/2 + (hi + lo) with pi/2 in four float parts (96 bits): a - n C1 is exact (one fused
/// step; the difference fits 24 bits on the grid of a and n C1), n C2 is split exactly, the
/// difference is summed without error (TwoSum), and n C3 and n C4 join the low part. Checked over
/// every float below 2^17 when written (max 1 ulp against double libm, rounded). Then
/// sin(hi + lo) = hi + (hi z P(z) + lo) and cos(hi + lo) = 1 - z/2 + z^2 Q(z) - hi lo, with
/// z = hi^2 and the rounding error of 1 - z/2 carried (Taylor polynomials to the r^9 and r^10 terms).
constexpr float kSinCosFastBound = 131072.0f;  // 2^17

inline void sin_cos_reduced(float x, float& s, float& c, int32_t& q) {
  const float a = fp::fabs(x);
  const float shifter = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer in the low bits
  const float t = fp::fma(a, 0x1.45f306p-1f, shifter);
  q = __builtin_bit_cast(int32_t, t);
  const float n = t - shifter;
  const float r1 = fp::fma(-n, 0x1.921fb6p+0f, a);
  const float ph = n * -0x1.777a5cp-25f;
  const float pl = fp::fma(n, -0x1.777a5cp-25f, -ph);
  const float sum = r1 - ph;
  const float back = sum - r1;
  const float err = (r1 - (sum - back)) + (-ph - back);
  // r = hi + lo, not renormalised (|lo| may pass half an ulp of hi): the kernels below only need
  // lo to first order, and the exhaustive check over the domain stays within 1 ulp.
  const float hi = sum;
  const float lo = fp::fma(-n, 0x1.98a2e0p-77f, fp::fma(-n, -0x1.ee59dap-50f, err - pl));
  const float z = hi * hi;
  const float p = fp::fma(fp::fma(fp::fma(1.0f / 362880, z, -1.0f / 5040), z, 1.0f / 120), z, -1.0f / 6);
  s = hi + fp::fma(hi * z, p, lo);
  const float qc = fp::fma(fp::fma(fp::fma(-1.0f / 3628800, z, 1.0f / 40320), z, -1.0f / 720), z, 1.0f / 24);
  const float w = 0.5f * z;
  const float h = 1.0f - w;
  c = h + fp::fma(-hi, lo, fp::fma(z * z, qc, (1.0f - h) - w));
}

inline float sin_fast(float x) {
  float s, c;
  int32_t q;
  sin_cos_reduced(x, s, c, q);
  const int32_t sign = ((q & 2) << 30) ^ (to_bits(x) & static_cast<int32_t>(0x80000000u));
  return from_bits(to_bits((q & 1) ? c : s) ^ sign);
}

inline float cos_fast(float x) {
  float s, c;
  int32_t q;
  sin_cos_reduced(x, s, c, q);
  return from_bits(to_bits((q & 1) ? s : c) ^ (((q + 1) & 2) << 30));
}
#else
constexpr float kSinCosFastBound = kTanFastBound;
inline float sin_fast(float x) { return sin_by<reduce_half_pi_fast>(x); }
inline float cos_fast(float x) { return cos_by<reduce_half_pi_fast>(x); }
#endif
inline int sin_cos_fast_outside(float x) { return fp::fabs(x) < kSinCosFastBound ? 0 : 1; }

/// sqrt(a^2 + b^2) without overflow: in double, where the squares are exact and cannot overflow;
/// an infinite operand gives inf even when the other is nan (as C's hypot).
inline float hypot(float a, float b) {
  const double da = a, db = b;
  const float y = static_cast<float>(fp::sqrt(da * da + db * db));
  const float inf = std::numeric_limits<float>::infinity();
  return (fp::fabs(a) == inf) | (fp::fabs(b) == inf) ? inf : y;
}

/// The angle of the point (x, y), in [-pi, pi]: atan of the smaller magnitude over the larger (the
/// ratio rounded once from double), then pi/2 - r when |y| > |x|, pi - r when x is negative or -0,
/// and y's sign; the multiples of pi carry their rounding error as a second part. As libm:
/// atan2(+-0, +0) = +-0, atan2(+-0, -0) = +-pi, both infinite gives +-pi/4 or +-3pi/4, nan gives nan.
inline float atan2(float y, float x) {
  const float inf = std::numeric_limits<float>::infinity();
  const float ax = fp::fabs(x), ay = fp::fabs(y);
  const bool swap = ay > ax;
  const float num = swap ? ax : ay, den = swap ? ay : ax;
  const bool both_inf = (ax == inf) & (ay == inf);
  const float ratio = static_cast<float>(static_cast<double>(num) / static_cast<double>(den));
  const float t = (den == 0.0f) & (num == num) ? 0.0f : (both_inf ? 1.0f : ratio);  // a nan stays in the ratio
  const float r = atan(t);
  const float a = swap ? (1.5707963705062866f - r) + -4.371138828673793e-08f : r;
  const float b = fp::signbit(x) ? (3.1415927410125732f - a) + -8.742277657347586e-08f : a;
  return fp::copysign(b, y);
}

template <typename T> inline T exp(T x) { return fp::exp(x); }
template <typename T> inline T gelu(T x) { return T(0.5) * x * (T(1) + fp::erf(T(x * T(0.70710678118654752440)))); }
template <typename T> inline T log(T x) { return fp::log(x); }
template <typename T> inline T tanh(T x) { return fp::tanh(x); }
template <typename T> inline T erf(T x) { return fp::erf(x); }
template <typename T> inline T log2(T x) { return fp::log2(x); }
template <typename T> inline T sin(T x) { return fp::sin(x); }
template <typename T> inline T cos(T x) { return fp::cos(x); }
template <typename T> inline T tan(T x) { return fp::tan(x); }
template <typename T> inline T log10(T x) { return fp::log10(x); }
template <typename T> inline T log1p(T x) { return fp::log1p(x); }
template <typename T> inline T sinh(T x) { return fp::sinh(x); }
template <typename T> inline T cosh(T x) { return fp::cosh(x); }
template <typename T> inline T asinh(T x) { return fp::asinh(x); }
template <typename T> inline T acosh(T x) { return fp::acosh(x); }
template <typename T> inline T atanh(T x) { return fp::atanh(x); }
template <typename T> inline T cbrt(T x) { return fp::cbrt(x); }
template <typename T> inline T atan(T x) { return fp::atan(x); }
template <typename T> inline T asin(T x) { return fp::asin(x); }
template <typename T> inline T acos(T x) { return fp::acos(x); }
template <typename T> inline T hypot(T a, T b) { return fp::hypot(a, b); }
template <typename T> inline T atan2(T a, T b) { return fp::atan2(a, b); }
// rsqrt needs no polynomial: sqrt and divide are packed instructions (1 ulp for float).
template <typename T> inline T rsqrt(T x) { return T(1) / fp::sqrt(x); }

}  // namespace vm

}  // namespace pto
