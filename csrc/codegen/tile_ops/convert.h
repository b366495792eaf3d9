// Conversions between storage and compute types: the narrow formats (FP8 E4M3/E5M2/E8M0, HiFloat8,
// FP4 E2M1/E1M2, INT4), bf16 and fp16. Each conversion a tile loop applies is straight-line
// integer and float arithmetic with selects (no branches, no tables), so the loop compiles to packed
// SIMD on every CPU target (python/tests/codegen/test_vectorisation.py checks the assembly of each);
// HiFloat8, whose prefix codes vary the field widths, is converted by scalar code.
// Part of codegen/tile_ops.h, which includes the parts in order (and nothing else does).

namespace pto {

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
  constexpr uint32_t bias = (1u << (E - 1)) - 1, top = (1u << E) - 1, ones = (1u << M) - 1;
  const uint32_t exp = (b >> M) & top, mant = b & ones;
  // A normal code is a float with the exponent rebiased; a subnormal one mant * 2^(1 - bias - M).
  const float normal = bits_float(((exp + 127 - bias) << 23) | (mant << (23 - M)));
  const float sub = static_cast<float>(static_cast<int32_t>(mant)) * bits_float((128 - bias - M) << 23);
  const float mag = exp == 0 ? sub : normal;
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  const bool is_nan = exp == top && (Ieee ? mant != 0 : mant == ones);
  const float special = Ieee && exp == top && mant == 0 ? inf : mag;
  const float v = bits_float(float_bits(special) | (static_cast<uint32_t>(b & 0x80) << 24));
  return is_nan ? nan : v;
}

/// `f` rounded to nearest (ties to even) into that format. Past the largest finite value an
/// IEEE format gives infinity; the other saturates finite values and infinities (as torch's
/// float8_e4m3fn conversion does). NaN keeps its sign.
template <int E, int M, bool Ieee>
inline uint8_t f8_encode(float f) {
  constexpr uint32_t bias = (1u << (E - 1)) - 1, top = (1u << E) - 1;
  constexpr int32_t max_finite = Ieee ? ((top - 1) << M) | ((1u << M) - 1) : (top << M) | ((1u << M) - 2);
  constexpr int shift = 23 - M;
  const uint32_t u = float_bits(f), au = u & 0x7fffffffu;
  const float a = bits_float(au);
  // At or above 2^(1 - bias), a normal code: the float's bits rounded to M mantissa bits (nearest
  // even; a carry moves into the exponent), exponent rebiased.
  const uint32_t r = au + ((1u << (shift - 1)) - 1) + ((au >> shift) & 1);
  const int32_t normal = static_cast<int32_t>(r >> shift) - static_cast<int32_t>((127 - bias) << M);
  // Below it, a subnormal code: a in quanta of 2^(1 - bias - M), rounded through 1.5 * 2^23 (2^M,
  // the smallest normal, encodes the same way).
  const float t = a * bits_float((127 + bias - 1 + M) << 23) + 12582912.0f;
  const int32_t sub = static_cast<int32_t>(float_bits(t)) - 0x4B400000;
  int32_t bits = a < bits_float((128 - bias) << 23) ? sub : normal;
  // Past the largest finite value (infinity included): infinity, or the largest value.
  bits = bits > max_finite ? (Ieee ? static_cast<int32_t>(top << M) : max_finite) : bits;
  bits = a != a ? 0x7f : bits;
  return static_cast<uint8_t>(((u >> 24) & 0x80) | static_cast<uint32_t>(bits));
}

inline float f8_to_float(f8e4m3 v) { return f8_decode<4, 3, false>(v.bits); }
inline float f8_to_float(f8e5m2 v) { return f8_decode<5, 2, true>(v.bits); }
inline float f8_to_float(f8e8m0 v) {
  // 2^(b - 127): the float exponent field b, or for b = 0 the denormal 2^-127.
  const uint32_t b = v.bits;
  const float p = bits_float(b == 0 ? 0x00400000u : b << 23);
  return b == 0xff ? std::numeric_limits<float>::quiet_NaN() : p;
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
  // The code counts the midpoints between neighbouring values that a passes (a tie passes the
  // midpoint below an even code), so no search and no branch.
  const float* v = f4_magnitudes(e2m1);
  const uint32_t u = float_bits(f);
  const float a = bits_float(u & 0x7fffffffu);
  uint32_t k = 0;
  for (int i = 0; i < 7; ++i) {
    const float m = 0.5f * (v[i] + v[i + 1]);
    k += (a > m) | ((a == m) & (i & 1));
  }
  k = a != a ? 7 : k;
  return static_cast<uint8_t>(((u >> 28) & 8) | k);
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
  const uint32_t u = float_bits(f), exp = (u >> 23) & 0xff;
  const uint32_t g = (u >> 22) & 1, r = (u >> 21) & 1, st = (u & 0x1fffffu) != 0;
  const uint32_t up = g & (r | st | (exp > 0));
  return f8e8m0{static_cast<uint8_t>(exp == 0xff ? 0xff : exp + up)};
}

/// Converts between storage and compute types (bf16 by bit manipulation and the FP8 formats
/// through float, both rounding to nearest even; everything else by the language's conversion).
inline int32_t i4_value(i4 v) { return static_cast<int32_t>(static_cast<int8_t>(v.bits << 4)) >> 4; }
/// An integer wraps to its low 4 bits (as the wider integer conversions wrap).
inline i4 i4_from(int64_t v) { return i4{static_cast<uint8_t>(static_cast<uint64_t>(v) & 0xf)}; }
template <typename S>
inline i4 i4_from_value(S v) {
  if constexpr (std::is_same_v<S, float>) {
    // From 2^27 up every float is a multiple of 16 (low nibble 0, as the clamped int64 would give),
    // so a 32-bit conversion, which vectorises, gives the same nibble; nan gives 0.
    const float t = fp::fabs(v) < 134217728.0f ? v : 0.0f;
    return i4{static_cast<uint8_t>(static_cast<uint32_t>(static_cast<int32_t>(t)) & 0xf)};
  } else if constexpr (std::is_floating_point_v<S>) {
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

}  // namespace pto
