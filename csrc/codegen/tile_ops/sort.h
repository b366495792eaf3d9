// Sorting along the last tile axis (TSORTDESC, TSORTASC): the positions of the first K elements of
// each row in sorted order. Equal values keep their order (the lower position first); NaN sorts as
// the largest value, as torch's sort and topk.
#pragma once

namespace pto {

/// An unsigned key whose order is the value's: floats by their bits (negatives reversed, -0 as +0,
/// every NaN above +inf), signed integers with the sign bit flipped.
template <typename T, typename Enable = void>
struct SortKey {
  typedef std::make_unsigned_t<T> U;
  static U of(T v) {
    U u = static_cast<U>(v);
    if constexpr (std::is_signed<T>::value) u ^= static_cast<U>(U(1) << (sizeof(T) * 8 - 1));
    return u;
  }
};

template <typename T>
struct SortKey<T, std::enable_if_t<std::is_floating_point<T>::value>> {
  typedef std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t> U;
  static U of(T v) {
    if (v != v) return static_cast<U>(~U(0));
    v = v + T(0);  // -0 + 0 is +0: the two zeros are equal
    U b;
    memcpy(&b, &v, sizeof b);
    const U sign = static_cast<U>(U(1) << (sizeof(U) * 8 - 1));
    return (b & sign) ? static_cast<U>(~b) : static_cast<U>(b | sign);
  }
};

/// Rows of ROWS x N; `valid` leading elements of each take part. K * 16 <= N keeps a sorted list of
/// the best K while scanning (an element that does not beat the K-th is one compare); otherwise a
/// least-significant-digit radix sort of the keys (stable, one pass per byte that differs).
template <typename T, int64_t ROWS, int64_t N, int64_t K, bool DESC>
inline void tsort(int32_t* __restrict dst, const T* __restrict src, int64_t valid) {
  typedef typename SortKey<T>::U U;
  const int64_t n = valid < 0 ? 0 : valid > N ? N : valid;
  const int64_t kept = n < K ? n : K;
  auto key_of = [](T v) -> U {
    const U k = SortKey<T>::of(v);
    return DESC ? static_cast<U>(~k) : k;
  };
  if constexpr (K * 16 <= N) {
    for (int64_t r = 0; r < ROWS; ++r) {
      const T* __restrict row = src + r * N;
      U best[K];
      int32_t at[K];
      int64_t filled = 0;
      for (int64_t i = 0; i < n; ++i) {
        const U key = key_of(row[i]);
        if (filled == K && key >= best[K - 1]) continue;  // a later position loses a tie
        int64_t p = filled < K ? filled++ : K - 1;
        for (; p > 0 && best[p - 1] > key; --p) {
          best[p] = best[p - 1];
          at[p] = at[p - 1];
        }
        best[p] = key;
        at[p] = static_cast<int32_t>(i);
      }
      for (int64_t j = 0; j < kept; ++j) dst[r * K + j] = at[j];
    }
    return;
  } else {
    constexpr int64_t kBytes = static_cast<int64_t>(sizeof(U));
    void* mem = malloc(static_cast<size_t>(N) * 2 * (sizeof(U) + sizeof(int32_t)));
    if (!mem) {
      fprintf(stderr, "pypto: out of memory sorting a tile of %lld elements\n", static_cast<long long>(N));
      abort();
    }
    U* keys = static_cast<U*>(mem);
    U* keys2 = keys + N;
    int32_t* pos = reinterpret_cast<int32_t*>(keys2 + N);
    int32_t* pos2 = pos + N;
    for (int64_t r = 0; r < ROWS; ++r) {
      const T* __restrict row = src + r * N;
      for (int64_t i = 0; i < n; ++i) {
        keys[i] = key_of(row[i]);
        pos[i] = static_cast<int32_t>(i);
      }
      uint32_t count[kBytes][256] = {};
      for (int64_t i = 0; i < n; ++i)
        for (int64_t b = 0; b < kBytes; ++b) ++count[b][(keys[i] >> (8 * b)) & 0xff];
      U* k_in = keys;
      U* k_out = keys2;
      int32_t* p_in = pos;
      int32_t* p_out = pos2;
      for (int64_t b = 0; b < kBytes; ++b) {
        uint32_t* c = count[b];
        if (c[(k_in[0] >> (8 * b)) & 0xff] == static_cast<uint32_t>(n)) continue;  // one digit: nothing moves
        uint32_t sum = 0;
        for (int d = 0; d < 256; ++d) {
          const uint32_t t = c[d];
          c[d] = sum;
          sum += t;
        }
        for (int64_t i = 0; i < n; ++i) {
          const uint32_t slot = c[(k_in[i] >> (8 * b)) & 0xff]++;
          k_out[slot] = k_in[i];
          p_out[slot] = p_in[i];
        }
        U* kt = k_in;
        k_in = k_out;
        k_out = kt;
        int32_t* pt = p_in;
        p_in = p_out;
        p_out = pt;
      }
      for (int64_t j = 0; j < kept; ++j) dst[r * K + j] = p_in[j];
    }
    free(mem);
  }
}

}  // namespace pto
