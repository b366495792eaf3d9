// Storage types, conversions, reduction start values and the integer helpers generated code uses.
// Part of codegen/tile_ops.h, which includes the parts in order (and nothing else does).

namespace pto {

/// bfloat16 storage: the top 16 bits of an IEEE float.
struct bf16 {
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

/// Converts between storage and compute types (bf16 by bit manipulation,
/// rounding to nearest even; everything else by the language's conversion).
template <typename D, typename S>
inline D cvt(S v) {
  return static_cast<D>(v);
}
template <>
inline float cvt<float, bf16>(bf16 v) {
  uint32_t u = uint32_t(v.bits) << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
template <>
inline bf16 cvt<bf16, float>(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return bf16{uint16_t((u >> 16) | 0x40)};  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return bf16{uint16_t(u >> 16)};
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
