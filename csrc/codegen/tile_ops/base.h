// Storage types, conversions, reduction start values and the integer helpers generated code uses.
// Part of codegen/tile_ops.h, which includes the parts in order (and nothing else does).

namespace pto {

/// The libm functions the tile library uses, as compiler builtins for float and double (integer
/// arguments compute in double, as <cmath>'s overloads do). Generated code does not include
/// <cmath>: parsing it was a third of a kernel's compile time.
namespace fp {
#define PTO_FP1(name)                                                            \
  inline float name(float x) { return __builtin_##name##f(x); }                 \
  inline double name(double x) { return __builtin_##name(x); }                  \
  template <typename T, typename = std::enable_if_t<std::is_integral_v<T>>>     \
  inline double name(T x) { return __builtin_##name(static_cast<double>(x)); }
#define PTO_FP2(name)                                                                    \
  inline float name(float x, float y) { return __builtin_##name##f(x, y); }              \
  inline double name(double x, double y) { return __builtin_##name(x, y); }
PTO_FP1(fabs)
PTO_FP1(sqrt)
PTO_FP1(exp)
PTO_FP1(exp2)
PTO_FP1(expm1)
PTO_FP1(log)
PTO_FP1(tanh)
PTO_FP1(erf)
PTO_FP1(erfc)
PTO_FP1(floor)
PTO_FP1(ceil)
PTO_FP1(trunc)
PTO_FP1(nearbyint)
PTO_FP2(pow)
PTO_FP2(fmod)
PTO_FP2(copysign)
PTO_FP2(nextafter)
#undef PTO_FP1
#undef PTO_FP2
inline float fma(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
inline double fma(double a, double b, double c) { return __builtin_fma(a, b, c); }
inline float ldexp(float x, int e) { return __builtin_ldexpf(x, e); }
inline double ldexp(double x, int e) { return __builtin_ldexp(x, e); }
inline int ilogb(float x) { return __builtin_ilogbf(x); }
inline bool signbit(float x) { return __builtin_signbit(x); }
inline bool signbit(double x) { return __builtin_signbit(x); }
inline bool isinf(float x) { return __builtin_isinf(x); }
inline bool isinf(double x) { return __builtin_isinf(x); }
inline bool isnan(float x) { return __builtin_isnan(x); }
inline bool isnan(double x) { return __builtin_isnan(x); }
}  // namespace fp

/// A float's bits and back.
inline uint32_t float_bits(float f) { return __builtin_bit_cast(uint32_t, f); }
inline float bits_float(uint32_t u) { return __builtin_bit_cast(float, u); }

/// bfloat16 storage: the top 16 bits of an IEEE float.
struct bf16 {
  uint16_t bits;
};

/// IEEE half-precision storage. Bits rather than the compiler's _Float16, whose loads and
/// conversions keep conversion loops scalar (and which not every target's compiler has).
struct f16 {
  uint16_t bits;
};

/// FP8 storage: one byte each. E4M3 (bias 7, no infinities, NaN 0x7f), E5M2 (bias 15, IEEE-like)
/// and E8M0 (an unsigned power of two 2^(b-127), NaN 0xff). Tiles hold them as float.
struct f8e4m3 {
  uint8_t bits;
};
struct f8e5m2 {
  uint8_t bits;
};
struct f8e8m0 {
  uint8_t bits;
};

/// HiFloat8 storage: after the sign, a prefix code (11, 10, 01, 001, 0001, 0000) gives the
/// exponent 4, 3, 2, 1 or 0 bits (sign-magnitude, the top magnitude bit implied), and the rest
/// is mantissa: 1 bit for |e| in 8..15, 2 for 4..7, 3 for 0..3. Code 0000 is the denormal mode,
/// 2^(m-23) for m in 1..7. 0x00 is zero, 0x80 NaN, 0x6f/0xef the infinities (the slot of
/// +-1.5 * 2^15), so the largest finite value is 2^15.
struct hf8 {
  uint8_t bits;
};

/// 4-bit types, one per byte in tiles and in a program's tensors (the code in the low nibble):
/// INT4 two's complement; FP4 E2M1 (OCP MX: 0, 0.5, 1, 1.5, 2, 3, 4, 6) and E1M2 (0 to 1.75 by
/// 0.25), each with a sign bit (bit 3) and no infinity or NaN.
struct i4 {
  uint8_t bits;
};
struct f4e2m1 {
  uint8_t bits;
};
struct f4e1m2 {
  uint8_t bits;
};
/// A byte holding two FP4 codes (the first in the low nibble); only moved, never computed on.
struct f4e2m1x2 {
  uint8_t bits;
};
struct f4e1m2x2 {
  uint8_t bits;
};

/// The narrow float storage types: converted through float.
template <typename T>
struct is_f8 : std::false_type {};
template <>
struct is_f8<f4e2m1> : std::true_type {};
template <>
struct is_f8<f4e1m2> : std::true_type {};
template <>
struct is_f8<hf8> : std::true_type {};
template <>
struct is_f8<f8e4m3> : std::true_type {};
template <>
struct is_f8<f8e5m2> : std::true_type {};
template <>
struct is_f8<f8e8m0> : std::true_type {};

/// The value of a sign/exponent/mantissa byte with E exponent and M mantissa bits; the top
/// exponent holds infinities and NaNs when `Ieee`, else only NaN (mantissa all ones).
template <int E, int M, bool Ieee>
inline float f8_decode(uint8_t b) {
  constexpr int bias = (1 << (E - 1)) - 1;
  const int exp = (b >> M) & ((1 << E) - 1);
  const int mant = b & ((1 << M) - 1);
  const float sign = (b & 0x80) ? -1.0f : 1.0f;
  if (exp == (1 << E) - 1) {
    if (Ieee) return mant == 0 ? sign * std::numeric_limits<float>::infinity() : std::numeric_limits<float>::quiet_NaN();
    if (mant == (1 << M) - 1) return std::numeric_limits<float>::quiet_NaN();
  }
  if (exp == 0) return sign * fp::ldexp(static_cast<float>(mant), 1 - bias - M);
  return sign * fp::ldexp(static_cast<float>(mant + (1 << M)), exp - bias - M);
}

/// `f` rounded to nearest (ties to even) into that format. Past the largest finite value an
/// IEEE format gives infinity; the other saturates finite values and infinities (as torch's
/// float8_e4m3fn conversion does). NaN keeps its sign.
template <int E, int M, bool Ieee>
inline uint8_t f8_encode(float f) {
  constexpr int bias = (1 << (E - 1)) - 1;
  constexpr int emin = 1 - bias;
  constexpr uint32_t top = (1u << E) - 1;
  constexpr uint32_t max_finite = Ieee ? ((top - 1) << M) | ((1u << M) - 1) : (top << M) | ((1u << M) - 2);
  const uint8_t sign = fp::signbit(f) ? 0x80 : 0;
  const float a = fp::fabs(f);
  if (a != a) return sign | 0x7f;
  if (a == 0.0f) return sign;
  uint32_t bits;
  if (fp::isinf(a)) {
    bits = Ieee ? top << M : max_finite;
  } else {
    int e = fp::ilogb(a);
    const int eq = e < emin ? emin : e;
    // The number of quanta of 2^(eq-M): exact scaling, then the current (nearest-even) rounding.
    uint32_t n = static_cast<uint32_t>(fp::nearbyint(fp::ldexp(a, M - eq)));
    if (e < emin) {
      bits = n;  // a subnormal; n == 2^M is the smallest normal, which encodes the same way
    } else {
      int ee = eq;
      if (n == (2u << M)) n >>= 1, ++ee;
      bits = ee + bias > static_cast<int>(top) ? UINT32_MAX : (static_cast<uint32_t>(ee + bias) << M) | (n - (1u << M));
    }
    if (bits > max_finite) bits = Ieee ? top << M : max_finite;
  }
  return static_cast<uint8_t>(sign | bits);
}

inline float f8_to_float(f8e4m3 v) { return f8_decode<4, 3, false>(v.bits); }
inline float f8_to_float(f8e5m2 v) { return f8_decode<5, 2, true>(v.bits); }
inline float f8_to_float(f8e8m0 v) {
  return v.bits == 0xff ? std::numeric_limits<float>::quiet_NaN() : fp::ldexp(1.0f, int(v.bits) - 127);
}
inline float f8_to_float(hf8 v) {
  const uint8_t b = v.bits, low = b & 0x7f;
  const float sign = (b & 0x80) ? -1.0f : 1.0f;
  if (low == 0) return b ? std::numeric_limits<float>::quiet_NaN() : 0.0f;
  if (low == 0x6f) return sign * std::numeric_limits<float>::infinity();
  if ((low >> 3) == 0) return sign * fp::ldexp(1.0f, (low & 7) - 23);  // denormal mode
  int ebits, mbits;  // widths of the exponent and mantissa fields after the prefix code
  if (low >> 5 == 3) ebits = 4, mbits = 1;
  else if (low >> 5 == 2) ebits = 3, mbits = 2;
  else if (low >> 5 == 1) ebits = 2, mbits = 3;
  else if (low >> 4 == 1) ebits = 1, mbits = 3;
  else ebits = 0, mbits = 3;
  const int mant = low & ((1 << mbits) - 1);
  int e = 0;
  if (ebits > 0) {
    const int field = (low >> mbits) & ((1 << ebits) - 1);
    const int mag = (1 << (ebits - 1)) | (field & ((1 << (ebits - 1)) - 1));
    e = (field >> (ebits - 1)) ? -mag : mag;
  }
  return sign * fp::ldexp(static_cast<float>(mant + (1 << mbits)), e - mbits);
}

/// The HiFloat8 code of `f`: the nearest value, ties away from zero (the rounding PyPTO allows
/// for HiFloat8); past the largest finite value (from 1.25 * 2^15, the midpoint to the
/// infinity slot) infinity; below 2^-23 zero (which has no sign); NaN stays NaN.
inline uint8_t hf8_encode(float f) {
  // The 127 non-negative codes ordered by value: a code's value is monotonic in the code
  // within each prefix class, so the table is built once by sorting.
  struct Table {
    float value[127];
    uint8_t code[127];
    Table() {
      int n = 0;
      for (int c = 0; c < 0x80; ++c) {
        if (c == 0x6f) continue;
        value[n] = f8_to_float(hf8{static_cast<uint8_t>(c)});
        code[n++] = static_cast<uint8_t>(c);
      }
      for (int i = 1; i < n; ++i)  // insertion sort of 127 entries
        for (int j = i; j > 0 && value[j - 1] > value[j]; --j) {
          const float v = value[j - 1];
          const uint8_t c = code[j - 1];
          value[j - 1] = value[j], code[j - 1] = code[j];
          value[j] = v, code[j] = c;
        }
    }
  };
  static const Table t;
  if (f != f) return 0x80;
  const uint8_t sign = fp::signbit(f) ? 0x80 : 0;
  const float a = fp::fabs(f);
  if (a >= 40960.0f) return sign | 0x6f;  // 1.25 * 2^15 and up, infinity included
  // The first entry not below a; a lies between entries hi - 1 and hi.
  int lo = 0, hi = 126;
  while (lo < hi) {
    const int mid = (lo + hi) / 2;
    if (t.value[mid] < a) lo = mid + 1;
    else hi = mid;
  }
  int k = hi;
  if (k > 0 && t.value[k] != a) {
    // The midpoint of two neighbours is exact in float (they are within a factor 2 and have few bits).
    const float mid = 0.5f * (t.value[k - 1] + t.value[k]);
    if (a < mid) k = k - 1;
  }
  const uint8_t code = t.code[k];
  return code == 0 ? 0 : static_cast<uint8_t>(sign | code);
}

/// The magnitudes of the 3-bit FP4 codes of E2M1 and E1M2.
inline const float* f4_magnitudes(bool e2m1) {
  static const float e2m1_values[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  static const float e1m2_values[8] = {0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 1.25f, 1.5f, 1.75f};
  return e2m1 ? e2m1_values : e1m2_values;
}
inline float f8_to_float(f4e2m1 v) {
  const float m = f4_magnitudes(true)[v.bits & 7];
  return (v.bits & 8) ? -m : m;
}
inline float f8_to_float(f4e1m2 v) {
  const float m = f4_magnitudes(false)[v.bits & 7];
  return (v.bits & 8) ? -m : m;
}
/// The FP4 code of `f`: the nearest value, ties to the even code; past the largest value (and
/// infinity) the largest value, as the MX formats saturate; NaN the largest value with NaN's sign
/// (FP4 has no NaN); zero keeps its sign.
inline uint8_t f4_encode(float f, bool e2m1) {
  const float* v = f4_magnitudes(e2m1);
  const uint8_t sign = fp::signbit(f) ? 8 : 0;
  const float a = fp::fabs(f);
  if (a != a || a >= v[7]) return sign | 7;
  int k = 0;
  while (k < 7 && v[k + 1] <= a) ++k;  // v[k] <= a < v[k + 1]
  const float lo = a - v[k], hi = v[k + 1] - a;
  if (hi < lo || (hi == lo && (k & 1))) ++k;
  return static_cast<uint8_t>(sign | k);
}

template <typename T>
inline T f8_from_float(float f);
template <>
inline f4e2m1 f8_from_float<f4e2m1>(float f) { return f4e2m1{f4_encode(f, true)}; }
template <>
inline f4e1m2 f8_from_float<f4e1m2>(float f) { return f4e1m2{f4_encode(f, false)}; }
template <>
inline hf8 f8_from_float<hf8>(float f) { return hf8{hf8_encode(f)}; }
template <>
inline f8e4m3 f8_from_float<f8e4m3>(float f) { return f8e4m3{f8_encode<4, 3, false>(f)}; }
template <>
inline f8e5m2 f8_from_float<f8e5m2>(float f) { return f8e5m2{f8_encode<5, 2, true>(f)}; }
/// E8M0 keeps the exponent of |f|, rounded to nearest with ties to even on the implied
/// mantissa bit (torch's rule); zero and subnormals below 2^-127 give 2^-127, inf and NaN NaN.
template <>
inline f8e8m0 f8_from_float<f8e8m0>(float f) {
  const uint32_t u = float_bits(f);
  uint32_t exp = (u >> 23) & 0xff;
  if (exp == 0xff) return f8e8m0{0xff};
  const bool g = u & 0x400000u, r = u & 0x200000u, st = u & 0x1fffffu;
  if (g && (r || st || exp > 0)) ++exp;
  return f8e8m0{static_cast<uint8_t>(exp)};
}

/// A per-thread, 64-byte-aligned buffer that grows to the largest size asked
/// (local buffers whose size depends on a symbolic dim).
struct Scratch {
  void* p = nullptr;
  size_t bytes = 0;
  /// Room for `count` elements, or nullptr when `count` is negative or the memory cannot be had.
  template <typename T>
  T* get(int64_t count) {
    if (count < 0 || static_cast<uint64_t>(count) > (UINT64_MAX - 63) / sizeof(T)) return nullptr;
    size_t need = (static_cast<size_t>(count) * sizeof(T) + 63) / 64 * 64;
    if (need > bytes) {
      void* q = aligned_alloc(64, need ? need : 64);
      if (q == nullptr) return nullptr;
      free(p);
      p = q;
      bytes = need;
    }
    return static_cast<T*>(p);
  }
  ~Scratch() { free(p); }
};

/// Converts between storage and compute types (bf16 by bit manipulation and the FP8 formats
/// through float, both rounding to nearest even; everything else by the language's conversion).
inline int32_t i4_value(i4 v) { return static_cast<int32_t>(static_cast<int8_t>(v.bits << 4)) >> 4; }
/// An integer wraps to its low 4 bits (as the wider integer conversions wrap).
inline i4 i4_from(int64_t v) { return i4{static_cast<uint8_t>(static_cast<uint64_t>(v) & 0xf)}; }
template <typename S>
inline i4 i4_from_value(S v) {
  if constexpr (std::is_floating_point_v<S>) {
    if (!(v == v)) return i4{0};
    const S lim = static_cast<S>(9.2e18);  // inside int64 for every float type
    return i4_from(static_cast<int64_t>(v < -lim ? -lim : v > lim ? lim : v));
  } else {
    return i4_from(static_cast<int64_t>(v));
  }
}

template <typename D, typename S>
inline D cvt(S v) {
  if constexpr (std::is_same_v<D, S>) {
    return v;
  } else if constexpr (std::is_same_v<S, i4>) {
    return cvt<D>(i4_value(v));
  } else if constexpr (std::is_same_v<D, i4>) {
    if constexpr (is_f8<S>::value || std::is_same_v<S, bf16> || std::is_same_v<S, f16>) return i4_from_value(cvt<float>(v));
    else return i4_from_value(v);
  } else if constexpr (std::is_same_v<S, f16>) {
    return cvt<D>(cvt<float>(v));
  } else if constexpr (std::is_same_v<D, f16>) {
    if constexpr (is_f8<S>::value || std::is_same_v<S, bf16>) return cvt<f16>(cvt<float>(v));
    else return cvt<f16>(static_cast<double>(v));
  } else if constexpr (is_f8<S>::value && is_f8<D>::value) {
    return f8_from_float<D>(f8_to_float(v));
  } else if constexpr (is_f8<S>::value) {
    return static_cast<D>(f8_to_float(v));
  } else if constexpr (is_f8<D>::value) {
    return f8_from_float<D>(static_cast<float>(v));
  } else {
    return static_cast<D>(v);
  }
}
template <>
inline float cvt<float, bf16>(bf16 v) {
  return bits_float(uint32_t(v.bits) << 16);
}
template <>
inline bf16 cvt<bf16, float>(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{uint16_t((u >> 16) | 0x40)};  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return bf16{uint16_t(u >> 16)};
}
/// fp16 <-> float by integer arithmetic and masks, so loops of conversions vectorise on every
/// target (selects would become branches). Round to nearest even, as the hardware conversions;
/// NaN stays NaN with the high bits of its payload, quieted.
template <>
inline float cvt<float, f16>(f16 v) {
  const uint32_t em = v.bits & 0x7fffu, sign = uint32_t(v.bits & 0x8000u) << 16;
  // The bits shifted into a float's place and scaled by 2^112 to rebias the exponent (exact, also
  // for the subnormals); inf and NaN get the all-ones exponent.
  const uint32_t u = float_bits(bits_float(em << 13) * 5.192296858534828e+33f);  // 2^112
  return bits_float(u | ((0u - uint32_t(em >= 0x7c00u)) & 0x7f800000u) | sign);
}
template <>
inline f16 cvt<f16, float>(float f) {
  const uint32_t sign = (float_bits(f) >> 16) & 0x8000u;
  const uint32_t x = float_bits(f) & 0x7fffffffu;
  // Below 2^-14 (fp16 subnormals and zero): adding 0.5 lets the float adder round the mantissa.
  const uint32_t sub = float_bits(bits_float(x) + 0.5f) - 0x3f000000u;
  // The normal range: rebias and round to nearest even on the 13 dropped bits.
  const uint32_t norm = (x + 0xc8000fffu + ((x >> 13) & 1u)) >> 13;
  const uint32_t small = 0u - uint32_t(x < 0x38800000u);
  uint32_t o = (sub & small) | (norm & ~small);
  const uint32_t over = 0u - uint32_t(x >= 0x47800000u), nan = 0u - uint32_t(x > 0x7f800000u);
  o = (o & ~over) | (0x7c00u & over);                                        // overflow: inf
  o = (o & ~nan) | ((0x7e00u | ((x >> 13) & 0x3ffu)) & nan);                 // NaN
  return f16{static_cast<uint16_t>(o | sign)};
}
/// fp16 from double through a float rounded to odd (float has more than two bits beyond fp16's,
/// so rounding that float to fp16 rounds the double correctly, with no double rounding).
template <>
inline f16 cvt<f16, double>(double d) {
  float f = static_cast<float>(d);
  if (static_cast<double>(f) != d && f == f && !fp::isinf(f)) {
    if (fp::fabs(static_cast<double>(f)) > fp::fabs(d)) f = fp::nextafter(f, 0.0f);
    f = bits_float(float_bits(f) | 1u);
  }
  return cvt<f16>(f);
}
template <>
inline bool cvt<bool, float>(float v) {
  return v != 0.0f;
}
template <>
inline bool cvt<bool, double>(double v) {
  return v != 0.0;
}

/// Start values of max/min reductions: -inf/inf for floats, the extremes for integers.
template <typename T>
inline T lowest() {
  return std::numeric_limits<T>::has_infinity ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
}
template <typename T>
inline T highest() {
  return std::numeric_limits<T>::has_infinity ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::max();
}

/// Floor division; total, so that no operand traps: generated code checks a symbolic divisor
/// for 0 before it divides (zero_error), and INT64_MIN // -1 wraps.
inline int64_t floordiv(int64_t a, int64_t b) {
  if (__builtin_expect(b == 0, 0)) return 0;
  if (__builtin_expect(b == -1, 0)) return static_cast<int64_t>(0 - static_cast<uint64_t>(a));
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
inline int64_t floormod(int64_t a, int64_t b) { return a - floordiv(a, b) * b; }

/// The next value of a FOR variable `v` (< `stop`, `step` > 0): `v + step`, or `stop` when that would
/// reach or pass it, so that a step near 2^63 ends the loop instead of overflowing.
inline int64_t loop_next(int64_t v, int64_t step, int64_t stop) {
  return static_cast<uint64_t>(stop) - static_cast<uint64_t>(v) > static_cast<uint64_t>(step) ? v + step : stop;
}
inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }

}  // namespace pto
