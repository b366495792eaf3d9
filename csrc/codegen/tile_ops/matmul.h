// TMATMUL: the register-blocked float micro-kernel and the tile product.
// Part of codegen/tile_ops.h, which includes the parts in order (and nothing else does).

namespace pto {

/// Native SIMD vectors of floats for the matmul micro-kernel (GCC/Clang vector extensions).
typedef float vfloat __attribute__((vector_size(kVecFloats * sizeof(float))));

inline vfloat vload(const float* p) {
  vfloat v;
  memcpy(&v, p, sizeof v);
  return v;
}
inline void vstore(float* p, vfloat v) { memcpy(p, &v, sizeof v); }

/// Kernels are compiled with -ffp-contract=off (each operation rounds as written); the matmul
/// functions below accumulate their products by fused multiply-adds: contraction is turned back on
/// for them (all of them, so they still inline into each other).
#if defined(__clang__)
#define PTO_CONTRACT
#define PTO_CONTRACT_BODY _Pragma("clang fp contract(fast)")
#else
#define PTO_CONTRACT __attribute__((optimize("fp-contract=fast")))
#define PTO_CONTRACT_BODY
#endif

/// Register block of the float matmul: kMatmulRows rows x kMatmulVecs vectors of accumulators
/// (per target, tile_ops/target.h), each step loading kMatmulVecs vectors of b and broadcasting
/// kMatmulRows elements of a.
constexpr int64_t kMatmulRows = PTO_MATMUL_ROWS;
constexpr int64_t kMatmulVecs = PTO_MATMUL_VECS;
constexpr int64_t kMatmulCols = kMatmulVecs * kVecFloats;

/// The micro-kernel: d (MR x NV vectors, row stride N) = or += a (MR rows, row stride KA) @ b (K rows, row stride N).
template <int64_t MR, int64_t NV, bool ACC, int64_t K, int64_t N, int64_t KA>
inline PTO_CONTRACT void matmul_block(float* __restrict d, const float* __restrict a, const float* __restrict b) {
  PTO_CONTRACT_BODY
  vfloat acc[MR][NV];
  for (int64_t i = 0; i < MR; ++i)
    for (int64_t v = 0; v < NV; ++v) acc[i][v] = ACC ? vload(d + i * N + v * kVecFloats) : vfloat{};
  for (int64_t k = 0; k < K; ++k) {
    vfloat bv[NV];
    for (int64_t v = 0; v < NV; ++v) bv[v] = vload(b + k * N + v * kVecFloats);
    for (int64_t i = 0; i < MR; ++i) {
      const float av = a[i * KA + k];
      for (int64_t v = 0; v < NV; ++v) acc[i][v] += av * bv[v];
    }
  }
  for (int64_t i = 0; i < MR; ++i)
    for (int64_t v = 0; v < NV; ++v) vstore(d + i * N + v * kVecFloats, acc[i][v]);
}

/// Rows [0, M) of one column block of NV vectors (row strides: KA in a, NS in b and d), in
/// register blocks of at most kMatmulRows rows, balanced so no block is much shorter than the
/// others (32 rows with at most 6 per block: two blocks of 6 and four of 5, not five of 6 and 2).
template <int64_t NV, bool ACC, int64_t M, int64_t K, int64_t NS, int64_t KA>
inline PTO_CONTRACT void matmul_column_block(float* __restrict d, const float* __restrict a, const float* __restrict b) {
  constexpr int64_t blocks = (M + kMatmulRows - 1) / kMatmulRows;
  constexpr int64_t small = M / blocks, big = small + 1, nbig = M % blocks;
  for (int64_t i0 = 0; i0 < nbig * big; i0 += big) matmul_block<big, NV, ACC, K, NS, KA>(d + i0 * NS, a + i0 * KA, b);
  for (int64_t i0 = nbig * big; i0 < M; i0 += small)
    matmul_block<small, NV, ACC, K, NS, KA>(d + i0 * NS, a + i0 * KA, b);
}

template <bool ACC, typename T, int64_t M, int64_t K, int64_t N, int64_t KA, int64_t NS>
__attribute__((noinline)) PTO_CONTRACT void matmul_tile(T* __restrict d, const T* __restrict a, const T* __restrict b);

/// |v| as a double (exact enough for the bound below; no overflow at the type's minimum).
template <typename T>
inline double magnitude(T v) { return v >= 0 ? static_cast<double>(v) : -static_cast<double>(v); }

/// A per-thread scratch of at least n floats (grown as needed), or null when memory runs out.
inline float* int_matmul_scratch(int64_t n) {
  static thread_local float* buf = nullptr;
  static thread_local int64_t cap = 0;
  if (n > cap) {
    free(buf);
    buf = static_cast<float*>(aligned_alloc(64, static_cast<size_t>((n * 4 + 63) / 64 * 64)));
    cap = buf != nullptr ? n : 0;
  }
  return buf;
}

/// An integer product through the float micro-kernel, when it is exact there: every partial sum is
/// an integer of magnitude at most K max|a| max|b|, and fp32 holds each integer up to 2^24 exactly
/// (an int8 matmul's K may reach 1024). Returns false, having done nothing, when the bound fails.
template <bool ACC, typename T, int64_t M, int64_t K, int64_t N, int64_t KA, int64_t NS>
bool matmul_int_as_float(T* __restrict d, const T* __restrict a, const T* __restrict b) {
  double ma = 0, mb = 0;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k) {
      const double m = magnitude(a[i * KA + k]);
      ma = m > ma ? m : ma;
    }
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < N; ++j) {
      const double m = magnitude(b[k * NS + j]);
      mb = m > mb ? m : mb;
    }
  if (ma * mb * static_cast<double>(K) > 16777216.0) return false;
  float* fa = int_matmul_scratch(M * K + K * N + M * N);
  if (fa == nullptr) return false;
  float* fb = fa + M * K;
  float* fd = fb + K * N;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t k = 0; k < K; ++k) fa[i * K + k] = static_cast<float>(a[i * KA + k]);
  for (int64_t k = 0; k < K; ++k)
    for (int64_t j = 0; j < N; ++j) fb[k * N + j] = static_cast<float>(b[k * NS + j]);
  matmul_tile<false, float, M, K, N, K, N>(fd, fa, fb);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)
      d[i * NS + j] = (ACC ? d[i * NS + j] : T(0)) + static_cast<T>(fd[i * N + j]);
  return true;
}

/// d (M x N, row stride NS) = or += a (M x K, row stride KA) @ b (K x N, row stride NS) for any
/// T: floats through the register-blocked micro-kernel over column blocks of kMatmulCols (then
/// single vectors), the columns left over and other types through the i-k-j loop, which streams
/// rows of b so its inner loop vectorises.
/// Not inlined: compiled as a function of its own, the micro-kernel has the whole vector register
/// file (inlined into a kernel whose other instructions keep constants in registers, it lost one,
/// and one vector of b was reloaded by every fused multiply-add: an fp16-input matmul, whose
/// conversions hold such constants, ran 1.5x slower than the same bf16 one on AVX2).
template <bool ACC, typename T, int64_t M, int64_t K, int64_t N, int64_t KA, int64_t NS>
__attribute__((noinline)) PTO_CONTRACT void matmul_tile(T* __restrict d, const T* __restrict a, const T* __restrict b) {
  PTO_CONTRACT_BODY
  int64_t j0 = 0;
  if constexpr (std::is_same<T, int32_t>::value || std::is_same<T, int64_t>::value) {
    if (matmul_int_as_float<ACC, T, M, K, N, KA, NS>(d, a, b)) return;
  }
  if constexpr (std::is_same<T, float>::value) {
    for (; j0 + kMatmulCols <= N; j0 += kMatmulCols)
      matmul_column_block<kMatmulVecs, ACC, M, K, NS, KA>(d + j0, a, b + j0);
    for (; j0 + kVecFloats <= N; j0 += kVecFloats) matmul_column_block<1, ACC, M, K, NS, KA>(d + j0, a, b + j0);
  }
  if (j0 == N) return;
  for (int64_t i = 0; i < M; ++i) {
    T* __restrict drow = d + i * NS;
    if (!ACC)
      for (int64_t j = j0; j < N; ++j) drow[j] = T(0);
    for (int64_t k = 0; k < K; ++k) {
      const T av = a[i * KA + k];
      const T* __restrict brow = b + k * NS;
      for (int64_t j = j0; j < N; ++j) drow[j] += av * brow[j];
    }
  }
}

/// TMATMUL / TMATMUL_ACC: dst (M x N) = or += a (M x K) @ b (K x N). The tile is the L1 cube tile;
/// (M0, K0, N0), the L0 cube tile, divides it into blocks multiplied one at a time (k blocks
/// outermost, so a K0 x N0 panel of b and an M0 x K0 panel of a stay in the core's first-level
/// cache while a block runs); inside a block the micro-kernel's register block is sized by the
/// vector register file.
template <bool ACC, typename T, int64_t M, int64_t K, int64_t N, int64_t M0 = M, int64_t K0 = K, int64_t N0 = N>
inline void tmatmul(T* __restrict dst, const T* __restrict a, const T* __restrict b) {
  static_assert(M % M0 == 0 && K % K0 == 0 && N % N0 == 0, "the L0 cube tile must divide the tile");
  if constexpr (M0 == M && K0 == K && N0 == N) {
    matmul_tile<ACC, T, M, K, N, K, N>(dst, a, b);
  } else {
    for (int64_t k0 = 0; k0 < K; k0 += K0)
      for (int64_t j0 = 0; j0 < N; j0 += N0)
        for (int64_t i0 = 0; i0 < M; i0 += M0) {
          T* d = dst + i0 * N + j0;
          const T* ab = a + i0 * K + k0;
          const T* bb = b + k0 * N + j0;
          if (k0 == 0) matmul_tile<ACC, T, M0, K0, N0, K, N>(d, ab, bb);
          else matmul_tile<true, T, M0, K0, N0, K, N>(d, ab, bb);
        }
  }
}

}  // namespace pto
