// The per-element functors of the op table and the elementwise, broadcast, select, cast and reduction templates.
// Part of codegen/tile_ops.h, which includes the parts in order (and nothing else does).

namespace pto {

struct OpAdd { template <typename T> static T f(T a, T b) { return a + b; } };
struct OpSub { template <typename T> static T f(T a, T b) { return a - b; } };
struct OpMul { template <typename T> static T f(T a, T b) { return a * b; } };
struct OpDiv { template <typename T> static T f(T a, T b) { return a / b; } };
// NaN propagates through maximum/minimum, as in torch. Written as two selects (no ||) so that they
// also apply to vector-extension types, lane by lane.
struct OpMax {
  template <typename T>
  static T f(T a, T b) {
    const T m = a > b ? a : b;
    return a != a ? a : m;
  }
};
struct OpMin {
  template <typename T>
  static T f(T a, T b) {
    const T m = a < b ? a : b;
    return a != a ? a : m;
  }
};
struct OpPow {
  template <typename T>
  static T f(T a, T b) {
    if constexpr (std::is_integral<T>::value) {
      if (b < 0) return a == 1 ? 1 : (a == -1 ? ((b & 1) ? -1 : 1) : 0);
      T r = 1;
      for (; b; b >>= 1, a *= a)
        if (b & 1) r *= a;
      return r;
    } else {
      return fp::pow(a, b);
    }
  }
};
// Division-like ops as torch computes them. Integers: the quotient rounds as named, a divisor of 0
// gives 0 and a divisor of -1 never overflows (the result wraps as negation does).
/// a / b for integers, rounded down (Up false) or up: the truncated quotient moves by one when there
/// is a remainder and the exact quotient lies on that side of it.
template <bool Up, typename T>
inline T int_div_rounded(T a, T b) {
  if (b == T(0)) return T(0);
  if constexpr (std::is_signed<T>::value) {
    if (b == T(-1)) return T(T(0) - a);
    const T q = a / b;
    if (a % b == 0 || (((a < 0) == (b < 0)) != Up)) return q;
    return Up ? T(q + 1) : T(q - 1);
  } else {
    return Up ? T(a / b + (a % b != 0)) : T(a / b);
  }
}
struct OpFloorDiv {
  template <typename T>
  static T f(T a, T b) {
    if constexpr (std::is_integral<T>::value) {
      return int_div_rounded<false>(a, b);
    } else {
      if (b == T(0)) return a / b;
      const T mod = fp::fmod(a, b);
      T div = (a - mod) / b;
      if (mod != T(0) && ((b < T(0)) != (mod < T(0)))) div -= T(1);
      if (div == T(0)) return fp::copysign(T(0), a / b);
      T fl = fp::floor(div);
      if (div - fl > T(0.5)) fl += T(1);
      return fl;
    }
  }
};
struct OpCeilDiv {
  template <typename T>
  static T f(T a, T b) {
    if constexpr (std::is_integral<T>::value) {
      return int_div_rounded<true>(a, b);
    } else {
      return fp::ceil(a / b);
    }
  }
};
struct OpFmod {
  template <typename T>
  static T f(T a, T b) {
    if constexpr (std::is_integral<T>::value) {
      if (b == T(0)) return T(0);
      if constexpr (std::is_signed<T>::value) {
        if (b == T(-1)) return T(0);
      }
      return a % b;
    } else {
      return fp::fmod(a, b);
    }
  }
};
struct OpRem {
  template <typename T>
  static T f(T a, T b) {
    const T r = OpFmod::f(a, b);
    if constexpr (std::is_unsigned<T>::value) {
      return r;
    } else {
      return (r != T(0) && ((r < T(0)) != (b < T(0)))) ? T(r + b) : r;
    }
  }
};
struct OpGt { template <typename T> static bool f(T a, T b) { return a > b; } };
struct OpGe { template <typename T> static bool f(T a, T b) { return a >= b; } };
struct OpLt { template <typename T> static bool f(T a, T b) { return a < b; } };
struct OpLe { template <typename T> static bool f(T a, T b) { return a <= b; } };
struct OpEq { template <typename T> static bool f(T a, T b) { return a == b; } };
struct OpNe { template <typename T> static bool f(T a, T b) { return a != b; } };

struct FnExp { template <typename T> static T f(T x) { return vm::exp(x); } };
struct FnNeg { template <typename T> static T f(T x) { return -x; } };
struct FnAbs { template <typename T> static T f(T x) { return x < T(0) ? T(-x) : (x == T(0) ? T(0) : x); } };
struct FnLog { template <typename T> static T f(T x) { return vm::log(x); } };
struct FnSqrt { template <typename T> static T f(T x) { return fp::sqrt(x); } };
struct FnRsqrt { template <typename T> static T f(T x) { return vm::rsqrt(x); } };
struct FnRecip { template <typename T> static T f(T x) { return T(1) / x; } };
struct FnRelu { template <typename T> static T f(T x) { return x < T(0) ? T(0) : x; } };
struct FnSigmoid { template <typename T> static T f(T x) { return T(1) / (T(1) + vm::exp(T(-x))); } };
struct FnTanh { template <typename T> static T f(T x) { return vm::tanh(x); } };
struct FnSilu { template <typename T> static T f(T x) { return x / (T(1) + vm::exp(T(-x))); } };
struct FnGelu { template <typename T> static T f(T x) { return vm::gelu(x); } };
struct FnErf { template <typename T> static T f(T x) { return vm::erf(x); } };
struct FnErfc { template <typename T> static T f(T x) { return fp::erfc(x); } };
struct FnFloor { template <typename T> static T f(T x) { return std::is_integral<T>::value ? x : T(fp::floor(x)); } };
struct FnCeil { template <typename T> static T f(T x) { return std::is_integral<T>::value ? x : T(fp::ceil(x)); } };
struct FnRound { template <typename T> static T f(T x) { return std::is_integral<T>::value ? x : T(fp::nearbyint(x)); } };
struct FnTrunc { template <typename T> static T f(T x) { return std::is_integral<T>::value ? x : T(fp::trunc(x)); } };
struct FnExp2 { template <typename T> static T f(T x) { return fp::exp2(x); } };
struct FnExpm1 { template <typename T> static T f(T x) { return fp::expm1(x); } };
// Bitwise ops and shifts (integer and bool operands only: the op table's Integer result type).
// Shifts follow torch: a left shift outside [0, bits) gives 0, a right shift there shifts by bits - 1.
/// The greatest common divisor of |a| and |b| by Stein's binary algorithm (shifts and subtractions,
/// no division), on the magnitudes taken unsigned: exact for every pair, the most negative value
/// included (its gcd is then wrapped into T).
struct OpGcd {
  template <typename T>
  static T f(T a, T b) {
    if constexpr (std::is_same<T, bool>::value) {
      return a || b;
    } else {
      using U = typename std::make_unsigned<T>::type;
      using W = typename std::conditional<(sizeof(T) > 4), uint64_t, uint32_t>::type;
      W x = static_cast<U>(a < T(0) ? U(U(0) - U(a)) : U(a));
      W y = static_cast<U>(b < T(0) ? U(U(0) - U(b)) : U(b));
      if (x == 0) return T(y);
      if (y == 0) return T(x);
      const int shift = __builtin_ctzll(x | y);
      x >>= __builtin_ctzll(x);
      do {
        y >>= __builtin_ctzll(y);
        if (x > y) {
          const W t = x;
          x = y;
          y = t;
        }
        y -= x;
      } while (y != 0);
      return T(x << shift);
    }
  }
};
struct OpBitAnd { template <typename T> static T f(T a, T b) { return T(a & b); } };
struct OpBitOr { template <typename T> static T f(T a, T b) { return T(a | b); } };
struct OpBitXor { template <typename T> static T f(T a, T b) { return T(a ^ b); } };
struct FnBitNot {
  template <typename T>
  static T f(T x) {
    if constexpr (std::is_same<T, bool>::value) return !x;
    else return T(~x);
  }
};
/// Whether a shift count is outside [0, the bits of T) (read as signed, as torch does).
template <typename T>
inline bool shift_out_of_range(T b) {
  return static_cast<std::make_signed_t<T>>(b) < 0 || b >= T(sizeof(T) * 8);
}
struct OpShl {
  template <typename T>
  static T f(T a, T b) {
    if constexpr (std::is_same<T, bool>::value || !std::is_integral<T>::value) {
      return a;
    } else {
      const bool out = shift_out_of_range(b);
      return out ? T(0) : T(static_cast<std::make_unsigned_t<T>>(a) << (out ? 0 : b));
    }
  }
};
struct OpShr {
  template <typename T>
  static T f(T a, T b) {
    if constexpr (std::is_same<T, bool>::value || !std::is_integral<T>::value) return a;
    else return T(a >> (shift_out_of_range(b) ? T(sizeof(T) * 8 - 1) : b));
  }
};
struct OpLogicalAnd { template <typename T> static bool f(T a, T b) { return (a != T(0)) & (b != T(0)); } };
struct OpLogicalOr { template <typename T> static bool f(T a, T b) { return (a != T(0)) | (b != T(0)); } };
struct FnSin {
  template <typename T> static T f(T x) { return vm::sin(x); }
  static float fast(float x) { return vm::sin_fast(x); }  // pass fast_forms
  static int outside(float x) { return vm::sin_cos_fast_outside(x); }
};
struct FnCos {
  template <typename T> static T f(T x) { return vm::cos(x); }
  static float fast(float x) { return vm::cos_fast(x); }  // pass fast_forms
  static int outside(float x) { return vm::sin_cos_fast_outside(x); }
};
struct FnTan {
  template <typename T> static T f(T x) { return vm::tan(x); }
  static float fast(float x) { return vm::tan_fast(x); }  // pass fast_forms
  static int outside(float x) { return vm::tan_fast_outside(x); }
};
struct FnLog2 { template <typename T> static T f(T x) { return vm::log2(x); } };
struct FnLog10 { template <typename T> static T f(T x) { return vm::log10(x); } };
struct FnLog1p { template <typename T> static T f(T x) { return vm::log1p(x); } };
struct FnSinh { template <typename T> static T f(T x) { return vm::sinh(x); } };
struct FnCosh { template <typename T> static T f(T x) { return vm::cosh(x); } };
struct FnAsinh { template <typename T> static T f(T x) { return vm::asinh(x); } };
struct FnAcosh { template <typename T> static T f(T x) { return vm::acosh(x); } };
struct FnAtanh { template <typename T> static T f(T x) { return vm::atanh(x); } };
struct FnCbrt { template <typename T> static T f(T x) { return vm::cbrt(x); } };
struct FnAtan { template <typename T> static T f(T x) { return vm::atan(x); } };
struct FnAsin { template <typename T> static T f(T x) { return vm::asin(x); } };
struct FnAcos { template <typename T> static T f(T x) { return vm::acos(x); } };
// NaN is the only value unequal to itself; integers are never NaN and always finite.
struct FnIsnan { template <typename T> static T f(T x) { return x != x ? T(1) : T(0); } };
struct FnIsfinite { template <typename T> static T f(T x) { return std::is_integral<T>::value || x - x == T(0) ? T(1) : T(0); } };
struct OpHypot { template <typename T> static T f(T a, T b) { return vm::hypot(a, b); } };
struct OpAtan2 { template <typename T> static T f(T a, T b) { return vm::atan2(a, b); } };
struct OpCopysign { template <typename T> static T f(T a, T b) { return fp::copysign(a, b); } };
struct FnNot { template <typename T> static T f(T x) { return x == T(0) ? T(1) : T(0); } };
// torch.sign: NaN and -0.0 give +0.
struct FnSign { template <typename T> static T f(T x) { return x > T(0) ? T(1) : (x < T(0) ? T(-1) : T(0)); } };
struct FnSignbit {
  template <typename T>
  static T f(T x) {
    if constexpr (std::is_floating_point<T>::value) return fp::signbit(x) ? T(1) : T(0);
    else if constexpr (std::is_signed<T>::value) return x < T(0) ? T(1) : T(0);
    else return T(0);
  }
};

/// Whether Fn has a fast form over a narrower domain (Fn::fast, with Fn::outside flagging the rest).
template <typename Fn, typename = void> struct has_fast_form : std::false_type {};
template <typename Fn>
struct has_fast_form<Fn, decltype(void(Fn::outside(0.0f)))> : std::true_type {};

/// A fp32 tile of a function with a fast form takes that form, and the full one only when some
/// element lies outside the fast form's domain (`a` is not written, so the second loop reads it again).
template <typename Fn, typename T, int64_t N>
inline void tunary(T* __restrict dst, const T* __restrict a) {
  if constexpr (has_fast_form<Fn>::value && std::is_same<T, float>::value) {
    int outside = 0;
#pragma omp simd reduction(|: outside)
    for (int64_t i = 0; i < N; ++i) {
      outside |= Fn::outside(a[i]);
      dst[i] = Fn::fast(a[i]);
    }
    if (!outside) return;
  }
  for (int64_t i = 0; i < N; ++i) dst[i] = Fn::f(a[i]);
}

/// Elementwise binary op; `dst` may alias `a` (accumulators), never `b`.
template <typename Op, typename D, typename T, int64_t N>
inline void tbinary(D* dst, const T* a, const T* __restrict b) {
  for (int64_t i = 0; i < N; ++i) dst[i] = D(Op::f(a[i], b[i]));
}

/// dst = a op s (tensor-scalar forms: TADDS, TMULS, ...).
template <typename Op, typename D, typename T, int64_t N>
inline void tbinary_rs(D* __restrict dst, const T* __restrict a, T s) {
  for (int64_t i = 0; i < N; ++i) dst[i] = D(Op::f(a[i], s));
}

/// dst = s op a (scalar on the left).
template <typename Op, typename D, typename T, int64_t N>
inline void tbinary_ls(D* __restrict dst, T s, const T* __restrict a) {
  for (int64_t i = 0; i < N; ++i) dst[i] = D(Op::f(s, a[i]));
}

/// dst[r, c] = a[r, c] op b[r]   (TROWEXPAND*)
template <typename Op, typename T, int64_t R, int64_t C>
inline void trowexpand(T* __restrict dst, const T* __restrict a, const T* __restrict b) {
  for (int64_t r = 0; r < R; ++r) {
    const T br = b[r];
    for (int64_t c = 0; c < C; ++c) dst[r * C + c] = Op::f(a[r * C + c], br);
  }
}

/// dst[r, c] = a[r, c] op b[c]   (TCOLEXPAND*)
template <typename Op, typename T, int64_t R, int64_t C>
inline void tcolexpand(T* __restrict dst, const T* __restrict a, const T* __restrict b) {
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) dst[r * C + c] = Op::f(a[r * C + c], b[c]);
}

/// TSELECT: dst = cond ? a : b (constants in the forms below).
template <typename T, int64_t N>
inline void tselect(T* __restrict dst, const int32_t* __restrict c, const T* __restrict a, const T* __restrict b) {
  for (int64_t i = 0; i < N; ++i) dst[i] = c[i] ? a[i] : b[i];
}
template <typename T, int64_t N>
inline void tselect_a(T* __restrict dst, const int32_t* __restrict c, T a, const T* __restrict b) {
  for (int64_t i = 0; i < N; ++i) dst[i] = c[i] ? a : b[i];
}
template <typename T, int64_t N>
inline void tselect_b(T* __restrict dst, const int32_t* __restrict c, const T* __restrict a, T b) {
  for (int64_t i = 0; i < N; ++i) dst[i] = c[i] ? a[i] : b;
}

/// TCAST: converts through the destination's storage type S, so the value
/// is exactly what storing and reloading it would give.
template <typename S, typename D, typename T, int64_t N>
inline void tcast(D* __restrict dst, const T* __restrict src) {
  for (int64_t i = 0; i < N; ++i) dst[i] = cvt<D>(cvt<S>(src[i]));
}

/// Floats in a native SIMD vector of the target (bytes / 4).
constexpr int64_t kVecFloats = PTO_VECTOR_BYTES / 4;

/// Reduces axis RED of a tile viewed as [OUTER, RED, INNER] over its first
/// `valid` entries (TROW*: INNER = 1; TCOL*: OUTER = 1; TRED*: a middle axis).
/// A row (INNER = 1) is reduced in kReduceLanes interleaved partial results,
/// combined at the end, so the loop vectorises; other layouts reduce whole
/// rows of INNER elements at a time.
constexpr int64_t kReduceLanes = 16;
/// Independent sets of kReduceLanes partial results a vectorised row reduction keeps.
constexpr int64_t kReduceSets = 4;

template <typename Op, typename T, int64_t OUTER, int64_t RED, int64_t INNER>
inline void treduce(T* __restrict dst, const T* __restrict a, int64_t valid, T init) {
  if (valid > RED) valid = RED;
  if (valid < 0) valid = 0;
  if constexpr (INNER == 1) {
    const int64_t chunks = valid / kReduceLanes;
    for (int64_t o = 0; o < OUTER; ++o) {
      const T* __restrict row = a + o * RED;
      T lanes[kReduceLanes];
      if constexpr (std::is_same<T, float>::value || std::is_same<T, double>::value ||
                    std::is_same<T, int32_t>::value || std::is_same<T, int64_t>::value) {
        // The lanes as native vector-extension values (kReduceLanes elements in all): compilers
        // keep them in SIMD registers, where a plain array of lanes is often reduced with scalar
        // instructions.
        constexpr int64_t kPer = kVecFloats * 4 / static_cast<int64_t>(sizeof(T));
        constexpr int64_t kVecs = kReduceLanes / kPer;
        typedef T Vec __attribute__((vector_size(kPer * sizeof(T))));
        // kReduceSets independent sets of partial results, so that the loop is not bound by the
        // latency of one chain of Op (a NaN-propagating max is three dependent instructions).
        Vec acc[kReduceSets][kVecs];
        for (int64_t s = 0; s < kReduceSets; ++s)
          for (int64_t v = 0; v < kVecs; ++v)
            for (int64_t l = 0; l < kPer; ++l) acc[s][v][l] = init;
        const int64_t whole = chunks / kReduceSets * kReduceSets;
        for (int64_t c = 0; c < whole; c += kReduceSets) {
          for (int64_t s = 0; s < kReduceSets; ++s) {
            for (int64_t v = 0; v < kVecs; ++v) {
              Vec x;
              memcpy(&x, row + (c + s) * kReduceLanes + v * kPer, sizeof x);
              acc[s][v] = Op::f(acc[s][v], x);
            }
          }
        }
        for (int64_t c = whole; c < chunks; ++c) {
          for (int64_t v = 0; v < kVecs; ++v) {
            Vec x;
            memcpy(&x, row + c * kReduceLanes + v * kPer, sizeof x);
            acc[0][v] = Op::f(acc[0][v], x);
          }
        }
        for (int64_t s = 1; s < kReduceSets; ++s)
          for (int64_t v = 0; v < kVecs; ++v) acc[0][v] = Op::f(acc[0][v], acc[s][v]);
        memcpy(lanes, acc[0], sizeof acc[0]);
      } else {
        for (int64_t l = 0; l < kReduceLanes; ++l) lanes[l] = init;
        for (int64_t c = 0; c < chunks; ++c)
          for (int64_t l = 0; l < kReduceLanes; ++l) lanes[l] = Op::f(lanes[l], row[c * kReduceLanes + l]);
      }
      for (int64_t w = kReduceLanes / 2; w >= 1; w /= 2)
        for (int64_t l = 0; l < w; ++l) lanes[l] = Op::f(lanes[l], lanes[l + w]);
      T r = lanes[0];
      for (int64_t c = chunks * kReduceLanes; c < valid; ++c) r = Op::f(r, row[c]);
      dst[o] = r;
    }
    return;
  }
  for (int64_t o = 0; o < OUTER; ++o) {
    T* __restrict d = dst + o * INNER;
    for (int64_t i = 0; i < INNER; ++i) d[i] = init;
    for (int64_t r = 0; r < valid; ++r) {
      const T* __restrict row = a + (o * RED + r) * INNER;
      for (int64_t i = 0; i < INNER; ++i) d[i] = Op::f(d[i], row[i]);
    }
  }
}


#if defined(PTO_HAS_SHUFFLE)
/// The lane permutation moving a vector of W lanes up by S lanes, the freed lanes taken from a
/// second vector (GCC's two-source __builtin_shuffle).
template <typename T, int64_t W, int64_t S>
struct ShiftUpMask {
  typedef std::conditional_t<sizeof(T) == 8, int64_t, int32_t> Lane;
  typedef Lane Mask __attribute__((vector_size(W * sizeof(T))));
  static Mask get() {
    Mask m;
    for (int64_t l = 0; l < W; ++l) m[l] = static_cast<Lane>(l >= S ? l - S : W + l);
    return m;
  }
};

/// The inclusive scan of the W lanes of x in log2(W) shift-and-combine steps (Hillis and Steele),
/// the shifted-in lanes holding Op's identity.
template <typename Op, typename T, int64_t W, int64_t S, typename Vec>
inline __attribute__((always_inline)) Vec scan_lanes(Vec x, Vec identity) {
  if constexpr (S >= W) {
    return x;
  } else {
    x = Op::f(x, __builtin_shuffle(x, identity, ShiftUpMask<T, W, S>::get()));
    return scan_lanes<Op, T, W, S * 2>(x, identity);
  }
}
#endif

/// TCUMSUM, TCUMPROD: dst = carry (+) the inclusive scan of a tile viewed as [OUTER, LEN, INNER]
/// along LEN; carry is [OUTER, INNER] (what the tiles before along the scanned dim combine to).
/// Along a middle or first axis the scan combines whole rows of INNER elements (vectorised across
/// them); along the last axis each row is scanned a SIMD vector at a time, in registers.
template <typename Op, typename T, int64_t OUTER, int64_t LEN, int64_t INNER>
inline void tscan(T* __restrict dst, const T* __restrict a, const T* __restrict carry, T init) {
  if constexpr (INNER > 1) {
    for (int64_t o = 0; o < OUTER; ++o) {
      const T* prev = carry + o * INNER;
      for (int64_t i = 0; i < LEN; ++i) {
        T* __restrict d = dst + (o * LEN + i) * INNER;
        const T* __restrict x = a + (o * LEN + i) * INNER;
        for (int64_t j = 0; j < INNER; ++j) d[j] = Op::f(prev[j], x[j]);
        prev = d;
      }
    }
    return;
  } else {
    int64_t whole = 0;
    (void)init;
#if defined(PTO_HAS_SHUFFLE)
    constexpr bool kVector = (std::is_floating_point<T>::value || std::is_integral<T>::value) &&
                             (sizeof(T) == 4 || sizeof(T) == 8);
    constexpr int64_t kPer = kVecFloats * 4 / static_cast<int64_t>(sizeof(T));
    if constexpr (kVector && kPer >= 2) {
      typedef T Vec __attribute__((vector_size(kPer * sizeof(T))));
      Vec identity;
      for (int64_t l = 0; l < kPer; ++l) identity[l] = init;
      whole = LEN / kPer * kPer;
      for (int64_t o = 0; o < OUTER; ++o) {
        const T* __restrict row = a + o * LEN;
        T* __restrict out = dst + o * LEN;
        T run = carry[o];
        for (int64_t c = 0; c < whole; c += kPer) {
          Vec x;
          memcpy(&x, row + c, sizeof x);
          x = scan_lanes<Op, T, kPer, 1>(x, identity);
          Vec before;
          for (int64_t l = 0; l < kPer; ++l) before[l] = run;
          x = Op::f(before, x);
          memcpy(out + c, &x, sizeof x);
          run = x[kPer - 1];
        }
      }
    }
#endif
    for (int64_t o = 0; o < OUTER; ++o) {
      T run = whole ? dst[o * LEN + whole - 1] : carry[o];
      for (int64_t c = whole; c < LEN; ++c) {
        run = Op::f(run, a[o * LEN + c]);
        dst[o * LEN + c] = run;
      }
    }
  }
}

}  // namespace pto
