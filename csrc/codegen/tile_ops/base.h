// Storage types (bf16, fp16), libm builtins, scratch buffers, reduction start values and the integer
// helpers generated code uses.
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
PTO_FP1(log2)
PTO_FP1(sin)
PTO_FP1(cos)
PTO_FP1(tan)
PTO_FP1(log10)
PTO_FP1(log1p)
PTO_FP1(sinh)
PTO_FP1(cosh)
PTO_FP1(asinh)
PTO_FP1(acosh)
PTO_FP1(atanh)
PTO_FP1(cbrt)
PTO_FP1(atan)
PTO_FP1(asin)
PTO_FP1(acos)
PTO_FP1(floor)
PTO_FP1(ceil)
PTO_FP1(trunc)
PTO_FP1(nearbyint)
PTO_FP2(pow)
PTO_FP2(fmod)
PTO_FP2(copysign)
PTO_FP2(hypot)
PTO_FP2(atan2)
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
