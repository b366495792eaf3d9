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

/// The micro-kernel: d (MR x NV vectors, row stride N) = or += a (MR rows, row stride KA) @ b (K rows,
/// row stride BS: N in a row-major tile, NV vectors in a column panel). With PF, each step of
/// kVecFloats along K also prefetches that step's cache line of MR rows from `pf` (the next block's
/// rows of a) into the second-level cache: a read once, streamed from memory, arrives before the
/// next block needs it.
template <int64_t MR, int64_t NV, bool ACC, int64_t K, int64_t N, int64_t KA, int64_t BS = N, bool PF = false>
inline PTO_CONTRACT void matmul_block(float* __restrict d, const float* __restrict a, const float* __restrict b,
                                      const float* pf = nullptr) {
  PTO_CONTRACT_BODY
  vfloat acc[MR][NV];
  for (int64_t i = 0; i < MR; ++i)
    for (int64_t v = 0; v < NV; ++v) acc[i][v] = ACC ? vload(d + i * N + v * kVecFloats) : vfloat{};
  auto step = [&](int64_t k) {
    vfloat bv[NV];
    for (int64_t v = 0; v < NV; ++v) bv[v] = vload(b + k * BS + v * kVecFloats);
    for (int64_t i = 0; i < MR; ++i) {
      const float av = a[i * KA + k];
      for (int64_t v = 0; v < NV; ++v) acc[i][v] += av * bv[v];
    }
  };
  if constexpr (PF) {
    constexpr int64_t KS = K / kVecFloats * kVecFloats;
    for (int64_t k0 = 0; k0 < KS; k0 += kVecFloats) {
      for (int64_t i = 0; i < MR; ++i) __builtin_prefetch(pf + i * KA + k0, 0, 2);
      for (int64_t k = k0; k < k0 + kVecFloats; ++k) step(k);
    }
    for (int64_t k = KS; k < K; ++k) step(k);
  } else {
    for (int64_t k = 0; k < K; ++k) step(k);
  }
  for (int64_t i = 0; i < MR; ++i)
    for (int64_t v = 0; v < NV; ++v) vstore(d + i * N + v * kVecFloats, acc[i][v]);
}

/// Rows [0, M) of one column block of NV vectors (row strides: KA in a, NS in d, BS in b), in
/// register blocks of at most RB rows, balanced so no block is much shorter than the others (32
/// rows with at most 6 per block: two blocks of 6 and four of 5, not five of 6 and 2).
template <int64_t NV, bool ACC, int64_t M, int64_t K, int64_t NS, int64_t KA, int64_t BS = NS,
          int64_t RB = kMatmulRows>
inline PTO_CONTRACT void matmul_column_block(float* __restrict d, const float* __restrict a, const float* __restrict b) {
  constexpr int64_t blocks = (M + RB - 1) / RB;
  constexpr int64_t small = M / blocks, big = small + 1, nbig = M % blocks;
  for (int64_t i0 = 0; i0 < nbig * big; i0 += big)
    matmul_block<big, NV, ACC, K, NS, KA, BS>(d + i0 * NS, a + i0 * KA, b);
  for (int64_t i0 = nbig * big; i0 < M; i0 += small)
    matmul_block<small, NV, ACC, K, NS, KA, BS>(d + i0 * NS, a + i0 * KA, b);
}

template <bool ACC, typename T, int64_t M, int64_t K, int64_t N, int64_t KA, int64_t NS, typename S = T>
__attribute__((noinline)) PTO_CONTRACT void matmul_tile(T* __restrict d, const S* __restrict a, const S* __restrict b);

/// One register block of the last r <= R rows (r known at run time; b's row stride BS).
template <int64_t NV, bool ACC, int64_t K, int64_t NS, int64_t KA, int64_t BS = NS, int64_t R = kMatmulRows - 1>
inline PTO_CONTRACT void matmul_block_of(float* __restrict d, const float* __restrict a, const float* __restrict b,
                                         int64_t r) {
  if constexpr (R > 0) {
    if (r == R) return matmul_block<R, NV, ACC, K, NS, KA, BS>(d, a, b);
    matmul_block_of<NV, ACC, K, NS, KA, BS, R - 1>(d, a, b, r);
  }
}

/// Rows [0, rows) of one column block, rows known at run time: whole register blocks of RB rows,
/// then one of the rows left. With PF, each whole block prefetches the next one's rows of a.
template <int64_t NV, bool ACC, int64_t K, int64_t NS, int64_t KA, int64_t RB = kMatmulRows, bool PF = false>
inline PTO_CONTRACT void matmul_column_rows(float* __restrict d, const float* __restrict a, const float* __restrict b,
                                            int64_t rows) {
  int64_t i0 = 0;
  for (; i0 + RB <= rows; i0 += RB)
    matmul_block<RB, NV, ACC, K, NS, KA, NS, PF>(d + i0 * NS, a + i0 * KA, b, a + (i0 + RB) * KA);
  if (i0 < rows) matmul_block_of<NV, ACC, K, NS, KA, NS, RB - 1>(d + i0 * NS, a + i0 * KA, b, rows - i0);
}

/// Products of at most kFewVecs vectors of columns (a W @ x^T of few tokens) run one column block
/// of all of them, so a is read once, by register blocks of kFewColumnRows<NV> rows: NV x rows
/// accumulators in three quarters of the vector registers, at most kMatmulRows rows.
constexpr int64_t kFewVecs = 4, kFewAccumulators = PTO_VECTOR_REGS * 3 / 4;
template <int64_t NV>
constexpr int64_t kFewColumnRows = kFewAccumulators / NV < kMatmulRows ? kFewAccumulators / NV : kMatmulRows;

/// Rows [0, rows) of a product of NV <= kFewVecs vectors of columns (row strides: KA in a, NS in d
/// and b), in one column block, each register block prefetching the next one's rows of a.
template <int64_t NV, bool ACC, int64_t K, int64_t NS, int64_t KA>
inline PTO_CONTRACT void matmul_few_columns(float* __restrict d, const float* __restrict a, const float* __restrict b,
                                            int64_t rows) {
  matmul_column_rows<NV, ACC, K, NS, KA, kFewColumnRows<NV>, true>(d, a, b, rows);
}

/// matmul_few_columns for nv (1 to kFewVecs) vectors known at run time.
template <bool ACC, int64_t K, int64_t NS, int64_t KA, int64_t NV = kFewVecs>
inline PTO_CONTRACT void matmul_few_columns_of(float* __restrict d, const float* __restrict a,
                                               const float* __restrict b, int64_t rows, int64_t nv) {
  if constexpr (NV > 0) {
    if (nv == NV) return matmul_few_columns<NV, ACC, K, NS, KA>(d, a, b, rows);
    matmul_few_columns_of<ACC, K, NS, KA, NV - 1>(d, a, b, rows, nv);
  }
}

/// The float product of the first `rows` rows of a (M x K) and the first `cols` columns of b only,
/// these in whole vectors (up to N): a tile whose valid rows or columns are fewer than its own (a
/// dynamic M, a decode step's single row; a dynamic N, the tokens of a W @ x^T) costs what its
/// valid part costs. The columns past those are left as they were.
template <bool ACC, int64_t M, int64_t K, int64_t N, int64_t KA, int64_t NS>
__attribute__((noinline)) PTO_CONTRACT void matmul_tile_part(float* __restrict d, const float* __restrict a,
                                                             const float* __restrict b, int64_t rows, int64_t cols) {
  PTO_CONTRACT_BODY
  const int64_t up = (cols + kVecFloats - 1) / kVecFloats * kVecFloats, nc = up < N ? up : N;
  int64_t j0 = 0;
  if (nc >= kVecFloats && nc <= kFewVecs * kVecFloats) {
    j0 = nc / kVecFloats * kVecFloats;
    matmul_few_columns_of<ACC, K, NS, KA>(d, a, b, rows, nc / kVecFloats);
  }
  for (; j0 + kMatmulCols <= nc; j0 += kMatmulCols)
    matmul_column_rows<kMatmulVecs, ACC, K, NS, KA>(d + j0, a, b + j0, rows);
  for (; j0 + kVecFloats <= nc; j0 += kVecFloats) matmul_column_rows<1, ACC, K, NS, KA>(d + j0, a, b + j0, rows);
  for (int64_t i = 0; i < rows && j0 < nc; ++i) {
    float* __restrict drow = d + i * NS;
    if (!ACC)
      for (int64_t j = j0; j < nc; ++j) drow[j] = 0.0f;
    for (int64_t k = 0; k < K; ++k)
      for (int64_t j = j0; j < nc; ++j) drow[j] += a[i * KA + k] * b[k * NS + j];
  }
}

/// a + b and a * b, for integers modulo 2^bits (the sums and products of an integer matmul wrap,
/// as torch's do; signed overflow would be undefined), for floats as they are.
template <typename T>
inline T wrapping_add(T a, T b) {
  if constexpr (std::is_integral<T>::value) {
    using U = typename std::conditional<sizeof(T) <= 4, uint32_t, uint64_t>::type;  // no promotion to int
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}
template <typename T>
inline T wrapping_mul(T a, T b) {
  if constexpr (std::is_integral<T>::value) {
    using U = typename std::conditional<sizeof(T) <= 4, uint32_t, uint64_t>::type;
    return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
  } else {
    return a * b;
  }
}

/// |v| as a double (exact enough for the bound below; no overflow at the type's minimum).
template <typename T>
inline double magnitude(T v) { return v >= 0 ? static_cast<double>(v) : -static_cast<double>(v); }

/// A per-thread scratch of at least `bytes` bytes, 64-byte aligned (grown as needed), or null when
/// memory runs out.
inline void* matmul_scratch(int64_t bytes) {
  static thread_local void* buf = nullptr;
  static thread_local int64_t cap = 0;
  if (bytes > cap) {
    free(buf);
    buf = aligned_alloc(64, static_cast<size_t>((bytes + 63) / 64 * 64));
    cap = buf != nullptr ? bytes : 0;
  }
  return buf;
}

// The int16-pair micro-kernel: on the x86 variants, whose PMADDWD does two products and their sum
// in one instruction (an emulation in the generic variant is slower than the float micro-kernel,
// which integer products there go through instead).
#if PTO_ISA >= PTO_ISA_SSE
/// Integer vectors of the float vector's width: int32 lanes, and the same bits as int16 lanes.
typedef uint32_t vpair_sum __attribute__((vector_size(kVecFloats * 4)));
typedef int16_t vpairs __attribute__((vector_size(kVecFloats * 4)));

/// Lane l of the result: a[2l] * b[2l] + a[2l+1] * b[2l+1], products and sum of int16s in int32
/// (modulo 2^32: one instruction, PMADDWD, on the x86 variants).
inline vpair_sum madd_pairs(vpairs a, vpairs b) {
#if PTO_ISA == PTO_ISA_AVX512 && defined(__clang__)
  return (vpair_sum)__builtin_ia32_pmaddwd512(a, b);
#elif PTO_ISA == PTO_ISA_AVX512
  typedef int32_t v16si __attribute__((vector_size(64)));
  return (vpair_sum)__builtin_ia32_pmaddwd512_mask(a, b, v16si{}, static_cast<unsigned short>(0xFFFF));
#elif PTO_ISA == PTO_ISA_AVX2
  return (vpair_sum)__builtin_ia32_pmaddwd256(a, b);
#else
  return (vpair_sum)__builtin_ia32_pmaddwd128(a, b);
#endif
}

#if PTO_INT8_DOT
typedef int32_t v16si_t __attribute__((vector_size(64)));
/// acc + madd_pairs(a, b) in one instruction (AVX512-VNNI's VPDPWSSD).
inline vpair_sum madd_pairs_acc(vpair_sum acc, vpairs a, vpairs b) {
#if defined(__clang__)
  return (vpair_sum)__builtin_ia32_vpdpwssd512((v16si_t)acc, (v16si_t)a, (v16si_t)b);
#else
  return (vpair_sum)__builtin_ia32_vpdpwssd_v16si((v16si_t)acc, (v16si_t)a, (v16si_t)b);
#endif
}

/// Lane l of the result: acc[l] + the sum of u[4l + t] * s[4l + t] over t < 4, u's bytes unsigned and
/// s's signed (exact in int32, the sum modulo 2^32: one instruction, AVX512-VNNI's VPDPBUSD).
inline v16si_t dot_quads(v16si_t acc, v16si_t u, v16si_t s) {
#if defined(__clang__)
  return __builtin_ia32_vpdpbusd512(acc, u, s);
#else
  return __builtin_ia32_vpdpbusd_v16si(acc, u, s);
#endif
}

/// A vector loaded by value (filled by memcpy, an array element of the micro-kernel stayed in
/// memory: every use reloaded it, a whole-vector load after two half-vector stores).
inline v16si_t load_v16si(const void* p) {
  v16si_t v;
  memcpy(&v, p, sizeof v);
  return v;
}

/// The int8-quad micro-kernel's register block: 24 accumulators of the 32 vector registers.
constexpr int64_t kInt8Rows = 8, kInt8Vecs = 3;

/// The int8-quad micro-kernel: d (MR x NV vectors of int32, row stride NS) = or += the product of
/// KQ quads of k: a as 32-bit words of four int8, one per row and quad (row stride KQ words); b as
/// words of four uint8 (each int8 + 128), one per quad and column (row stride BW words). The +128
/// adds 128 times the row's sum of a to each product: `fix` holds minus that, per row, and is the
/// accumulators' start.
template <int64_t MR, int64_t NV, bool ACC, int64_t KQ, int64_t NS, int64_t BW>
inline void matmul_block_quads(int32_t* __restrict d, const uint32_t* __restrict a, const int32_t* __restrict fix,
                               const uint32_t* __restrict b) {
  v16si_t acc[MR][NV];
  for (int64_t i = 0; i < MR; ++i)
    for (int64_t v = 0; v < NV; ++v) {
      acc[i][v] = v16si_t{} + fix[i];
      if (ACC) acc[i][v] = (v16si_t)((vpair_sum)acc[i][v] + (vpair_sum)load_v16si(d + i * NS + v * 16));  // mod 2^32
    }
  for (int64_t q = 0; q < KQ; ++q) {
    v16si_t bv[NV];
    for (int64_t v = 0; v < NV; ++v) bv[v] = load_v16si(b + q * BW + v * 16);
    for (int64_t i = 0; i < MR; ++i) {
      const v16si_t av = v16si_t{} + static_cast<int32_t>(a[i * KQ + q]);
      for (int64_t v = 0; v < NV; ++v) acc[i][v] = dot_quads(acc[i][v], bv[v], av);
    }
  }
  for (int64_t i = 0; i < MR; ++i)
    for (int64_t v = 0; v < NV; ++v) memcpy(d + i * NS + v * 16, &acc[i][v], sizeof acc[i][v]);
}

/// Rows [0, M) of one column block of NV vectors of the int8-quad micro-kernel, in balanced
/// register blocks (as matmul_column_block).
template <int64_t NV, bool ACC, int64_t M, int64_t KQ, int64_t NS, int64_t BW>
inline void int8_column_block(int32_t* __restrict d, const uint32_t* __restrict a, const int32_t* __restrict fix,
                              const uint32_t* __restrict b) {
  constexpr int64_t blocks = (M + kInt8Rows - 1) / kInt8Rows;
  constexpr int64_t small = M / blocks, big = small + 1, nbig = M % blocks;
  for (int64_t i0 = 0; i0 < nbig * big; i0 += big)
    matmul_block_quads<big, NV, ACC, KQ, NS, BW>(d + i0 * NS, a + i0 * KQ, fix + i0, b);
  for (int64_t i0 = nbig * big; i0 < M; i0 += small)
    matmul_block_quads<small, NV, ACC, KQ, NS, BW>(d + i0 * NS, a + i0 * KQ, fix + i0, b);
}

/// An int32 product of int8 tiles through the int8-quad micro-kernel. The operands are packed
/// first: a as one word per row and quad of k (the last quad padded with zeros), b as quads of rows
/// interleaved column by column, each byte offset by 128. Covers the columns up to the last whole vector; returns that column count, or -1,
/// having done nothing, when memory runs out.
template <bool ACC, int64_t M, int64_t K, int64_t N, int64_t KA, int64_t NS>
int64_t matmul_int8_quads(int32_t* __restrict d, const int8_t* __restrict a, const int8_t* __restrict b) {
  constexpr int64_t KQ = (K + 3) / 4, NC = N / 16 * 16;
  if constexpr (NC == 0) {
    return -1;
  } else {
    auto* ap = static_cast<uint32_t*>(matmul_scratch(M * KQ * 4 + M * 4 + KQ * NC * 4));
    if (ap == nullptr) return -1;
    auto* fix = reinterpret_cast<int32_t*>(ap + M * KQ);
    uint32_t* bp = ap + M * KQ + M;
    for (int64_t i = 0; i < M; ++i) {
      const int8_t* __restrict row = a + i * KA;
      int8_t* __restrict dst = reinterpret_cast<int8_t*>(ap + i * KQ);
      int32_t sum = 0;
      for (int64_t k = 0; k < K; ++k) {
        dst[k] = row[k];
        sum += row[k];
      }
      for (int64_t k = K; k < 4 * KQ; ++k) dst[k] = 0;
      fix[i] = static_cast<int32_t>(0u - 128u * static_cast<uint32_t>(sum));  // modulo 2^32
    }
    for (int64_t q = 0; q < KQ; ++q) {
      const int8_t* __restrict r[4];
      uint32_t keep[4];
      for (int64_t t = 0; t < 4; ++t) {
        r[t] = b + (4 * q + t < K ? 4 * q + t : 4 * q) * NS;
        keep[t] = 4 * q + t < K ? 0xFFu : 0u;  // past K: zero bytes (a's are zero there too)
      }
      uint32_t* __restrict dst = bp + q * NC;
      for (int64_t j = 0; j < NC; ++j) {
        uint32_t w = 0;
        for (int64_t t = 0; t < 4; ++t)
          w |= ((static_cast<uint32_t>(static_cast<uint8_t>(r[t][j])) ^ 0x80u) & keep[t]) << (8 * t);
        dst[j] = w;
      }
    }
    constexpr int64_t cols = kInt8Vecs * 16;
    int64_t j0 = 0;
    for (; j0 + cols <= NC; j0 += cols) int8_column_block<kInt8Vecs, ACC, M, KQ, NS, NC>(d + j0, ap, fix, bp + j0);
    for (; j0 < NC; j0 += 16) int8_column_block<1, ACC, M, KQ, NS, NC>(d + j0, ap, fix, bp + j0);
    return NC;
  }
}
#endif  // PTO_INT8_DOT

/// The int16-pair micro-kernel: d (MR x NV vectors of int32, row stride NS) = or += the product of
/// KP pairs: a and b as 32-bit words of two int16, a one per row and pair (row stride AW words),
/// b one per pair and column (row stride BW words).
template <int64_t MR, int64_t NV, bool ACC, int64_t KP, int64_t NS, int64_t AW, int64_t BW>
inline void matmul_block_pairs(int32_t* __restrict d, const uint32_t* __restrict a, const uint32_t* __restrict b) {
  vpair_sum acc[MR][NV];
  for (int64_t i = 0; i < MR; ++i)
    for (int64_t v = 0; v < NV; ++v) {
      acc[i][v] = vpair_sum{};
      if (ACC) memcpy(&acc[i][v], d + i * NS + v * kVecFloats, sizeof acc[i][v]);
    }
  for (int64_t p = 0; p < KP; ++p) {
    vpairs bv[NV];
    for (int64_t v = 0; v < NV; ++v) memcpy(&bv[v], b + p * BW + v * kVecFloats, sizeof bv[v]);
    for (int64_t i = 0; i < MR; ++i) {
      const vpairs av = (vpairs)(vpair_sum{} + a[i * AW + p]);
#if PTO_INT8_DOT
      for (int64_t v = 0; v < NV; ++v) acc[i][v] = madd_pairs_acc(acc[i][v], av, bv[v]);
#else
      for (int64_t v = 0; v < NV; ++v) acc[i][v] += madd_pairs(av, bv[v]);
#endif
    }
  }
  for (int64_t i = 0; i < MR; ++i)
    for (int64_t v = 0; v < NV; ++v) memcpy(d + i * NS + v * kVecFloats, &acc[i][v], sizeof acc[i][v]);
}

/// Rows [0, M) of one column block of NV vectors, in balanced register blocks (as
/// matmul_column_block; the float kernel's register block suits this one too: 6 x 2 beat 4 x 2, 5 x 2
/// and 7 x 2 on AVX2, and 4 x 3 spills).
template <int64_t NV, bool ACC, int64_t M, int64_t KP, int64_t NS, int64_t AW, int64_t BW>
inline void matmul_column_block_pairs(int32_t* __restrict d, const uint32_t* __restrict a,
                                      const uint32_t* __restrict b) {
  constexpr int64_t blocks = (M + kMatmulRows - 1) / kMatmulRows;
  constexpr int64_t small = M / blocks, big = small + 1, nbig = M % blocks;
  for (int64_t i0 = 0; i0 < nbig * big; i0 += big)
    matmul_block_pairs<big, NV, ACC, KP, NS, AW, BW>(d + i0 * NS, a + i0 * AW, b);
  for (int64_t i0 = nbig * big; i0 < M; i0 += small)
    matmul_block_pairs<small, NV, ACC, KP, NS, AW, BW>(d + i0 * NS, a + i0 * AW, b);
}

/// An int32 product through the int16-pair micro-kernel: of int8 or int16 tiles, or of int32 tiles
/// whose every value fits in int16 (int8 and int16 data a load widened). The sums are modulo 2^32,
/// as the plain loop gives. The operands are packed first: a as one word per row and pair of k (the odd k's pair
/// padded with 0), b as pairs of rows interleaved column by column. Covers the columns up to the
/// last whole vector; returns that column count, or -1, having done nothing, when a value does not
/// fit or memory runs out.
template <bool ACC, int64_t M, int64_t K, int64_t N, int64_t KA, int64_t NS, typename S>
int64_t matmul_int16_pairs(int32_t* __restrict d, const S* __restrict a, const S* __restrict b) {
  static_assert(sizeof(S) <= 4 && std::is_signed<S>::value, "int8, int16 or int32 operands");
  constexpr bool checked = sizeof(S) > 2;  // int32 values may not fit in int16
  constexpr int64_t KP = (K + 1) / 2, NC = N / kVecFloats * kVecFloats;
  if constexpr (NC == 0) {
    return -1;
  } else {
    auto* ap = static_cast<uint32_t*>(matmul_scratch(M * KP * 4 + KP * NC * 4));
    if (ap == nullptr) return -1;
    uint32_t* bp = ap + M * KP;
    // Both packings are 32-bit lane operations (so they vectorise): a row of a narrowed to int16
    // is its words of pairs (little-endian); a word of b's pairs is the low halves of two rows'
    // elements, the second shifted up.
    uint32_t out_of_range = 0;  // nonzero when some value is outside [-32768, 32767]
    for (int64_t i = 0; i < M; ++i) {
      const S* __restrict row = a + i * KA;
      int16_t* __restrict dst = reinterpret_cast<int16_t*>(ap + i * KP);
      for (int64_t k = 0; k < K; ++k) {
        if (checked) out_of_range |= (static_cast<uint32_t>(row[k]) + 32768u) >> 16;
        dst[k] = static_cast<int16_t>(row[k]);
      }
      if (K % 2 != 0) dst[K] = 0;
    }
    for (int64_t p = 0; p < KP; ++p) {
      const S* __restrict r0 = b + 2 * p * NS;
      const S* __restrict r1 = b + (2 * p + 1 < K ? 2 * p + 1 : 2 * p) * NS;
      const uint32_t keep = 2 * p + 1 < K ? 0xFFFFu : 0u;  // the odd k's pair: zeros
      uint32_t* __restrict dst = bp + p * NC;
      for (int64_t j = 0; j < NC; ++j) {
        const uint32_t lo = static_cast<uint32_t>(r0[j]), hi = static_cast<uint32_t>(r1[j]);
        if (checked) out_of_range |= ((lo + 32768u) | (hi + 32768u)) >> 16;
        dst[j] = (lo & 0xFFFFu) | ((hi & keep) << 16);
      }
    }
    if (out_of_range != 0) return -1;
    int64_t j0 = 0;
    for (; j0 + kMatmulCols <= NC; j0 += kMatmulCols)
      matmul_column_block_pairs<kMatmulVecs, ACC, M, KP, NS, KP, NC>(d + j0, ap, bp + j0);
    for (; j0 < NC; j0 += kVecFloats) matmul_column_block_pairs<1, ACC, M, KP, NS, KP, NC>(d + j0, ap, bp + j0);
    return NC;
  }
}
#endif  // PTO_ISA >= PTO_ISA_SSE

/// An integer product through the float micro-kernel, when it is exact there: every partial sum is
/// an integer of magnitude at most K max|a| max|b|, and fp32 holds each integer up to 2^24 exactly
/// (an int8 matmul's K may reach 1024). Returns false, having done nothing, when the bound fails.
template <bool ACC, typename T, int64_t M, int64_t K, int64_t N, int64_t KA, int64_t NS, typename S>
bool matmul_int_as_float(T* __restrict d, const S* __restrict a, const S* __restrict b) {
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
  auto* fa = static_cast<float*>(matmul_scratch((M * K + K * N + M * N) * 4));
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
      d[i * NS + j] = wrapping_add(ACC ? d[i * NS + j] : T(0), static_cast<T>(fd[i * N + j]));
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
template <bool ACC, typename T, int64_t M, int64_t K, int64_t N, int64_t KA, int64_t NS, typename S>
__attribute__((noinline)) PTO_CONTRACT void matmul_tile(T* __restrict d, const S* __restrict a, const S* __restrict b) {
  PTO_CONTRACT_BODY
  int64_t j0 = 0;
  // Integers: the int8-quad micro-kernel for int8 operands where the target has dot products, the
  // int16-pair one on x86, else the float one when it is exact.
#if PTO_ISA >= PTO_ISA_SSE
#if PTO_INT8_DOT
  if constexpr (std::is_same<T, int32_t>::value && std::is_same<S, int8_t>::value)
    j0 = matmul_int8_quads<ACC, M, K, N, KA, NS>(d, a, b);
  else
#endif
  if constexpr (std::is_same<T, int32_t>::value) j0 = matmul_int16_pairs<ACC, M, K, N, KA, NS>(d, a, b);
#endif
  if constexpr (std::is_same<T, int32_t>::value || std::is_same<T, int64_t>::value) {
    if (j0 <= 0) {
      j0 = 0;
      if (matmul_int_as_float<ACC, T, M, K, N, KA, NS>(d, a, b)) return;
    }
  }
  if constexpr (std::is_same<T, float>::value && N >= kVecFloats && N <= kFewVecs * kVecFloats) {
    j0 = N / kVecFloats * kVecFloats;
    matmul_few_columns<N / kVecFloats, ACC, K, NS, KA>(d, a, b, M);
  } else if constexpr (std::is_same<T, float>::value) {
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
      const S* __restrict brow = b + k * NS;
      for (int64_t j = j0; j < N; ++j) drow[j] = wrapping_add(drow[j], wrapping_mul(av, T(brow[j])));
    }
  }
}

/// TMATMUL / TMATMUL_ACC: dst (M x N) = or += a (M x K) @ b (K x N), operands of dst's type T (or
/// int8 / int16 ones of an int32 product, S). The tile is the L1 cube tile;
/// (M0, K0, N0), the L0 cube tile, divides it into blocks multiplied one at a time (k blocks
/// outermost, so a K0 x N0 panel of b and an M0 x K0 panel of a stay in the core's first-level
/// cache while a block runs); inside a block the micro-kernel's register block is sized by the
/// vector register file.
///
/// `rows` (the instruction's valid rows, when it has them) bounds the float product: rows past it
/// are not multiplied; a TMATMUL sets them to zero, as the product of a's zero-filled rows would.
template <bool ACC, int64_t M, int64_t K, int64_t N, bool BT = false>
void tmatmul_bf16(float* __restrict d, const bf16* __restrict a, const bf16* __restrict b, int64_t rows,
                  int64_t lda, int64_t ldb, int64_t cols = N);

/// `cols` (the instruction's valid columns, float products) bounds the product's columns the same
/// way: a float product multiplies whole vectors of them, a TMATMUL zeroes the columns past them.
template <bool ACC, typename T, int64_t M, int64_t K, int64_t N, int64_t M0 = M, int64_t K0 = K, int64_t N0 = N,
          typename S = T>
inline void tmatmul(T* __restrict dst, const S* __restrict a, const S* __restrict b, int64_t rows = M,
                    int64_t lda = K, int64_t ldb = N, int64_t cols = N) {
  static_assert(M % M0 == 0 && K % K0 == 0 && N % N0 == 0, "the L0 cube tile must divide the tile");
  // bf16 operands of a float product (matmul_bf16.h): by dot products over the whole tile, which
  // blocks it by its own register tiles (the L0 blocks are the float micro-kernel's).
  if constexpr (std::is_same<T, float>::value && std::is_same<S, bf16>::value) {
    tmatmul_bf16<ACC, M, K, N>(dst, a, b, rows, lda, ldb, cols);
  } else {
    (void)lda, (void)ldb;  // these operands are whole tiles
    constexpr bool kFloat = std::is_same<T, float>::value && std::is_same<S, float>::value;
    if (!kFloat || rows > M) rows = M;  // other types multiply the whole tile
    if (rows < 0) rows = 0;
    if (!kFloat || cols > N) cols = N;
    if (cols < 0) cols = 0;
    if (!ACC && rows < M) memset(dst + rows * N, 0, sizeof(T) * (M - rows) * N);
    // One block: a whole one, or the one the valid rows or columns end in (r < M0, c < N0). A is
    // the accumulate flag, a type so that only the forms a tile uses are instantiated.
    auto block = [](auto acc, T* d, const S* ab, const S* bb, int64_t r, int64_t c) {
      constexpr bool A = decltype(acc)::value;
      if constexpr (kFloat) {
        if (r < M0 || c < N0) return matmul_tile_part<A, M0, K0, N0, K, N>(d, ab, bb, r, c);
      }
      matmul_tile<A, T, M0, K0, N0, K, N>(d, ab, bb);
    };
    for (int64_t k0 = 0; k0 < K; k0 += K0)
      for (int64_t j0 = 0; j0 < cols; j0 += N0)
        for (int64_t i0 = 0; i0 < rows; i0 += M0) {
          T* d = dst + i0 * N + j0;
          const S* ab = a + i0 * K + k0;
          const S* bb = b + k0 * N + j0;
          const int64_t r = rows - i0 < M0 ? rows - i0 : M0, c = cols - j0 < N0 ? cols - j0 : N0;
          if constexpr (ACC || K0 == K) block(std::integral_constant<bool, ACC>{}, d, ab, bb, r, c);
          else if (k0 > 0) block(std::true_type{}, d, ab, bb, r, c);
          else block(std::false_type{}, d, ab, bb, r, c);
        }
    if (!ACC && cols < N)
      for (int64_t i = 0; i < rows; ++i) memset(dst + i * N + cols, 0, sizeof(T) * (N - cols));
  }
}

/// TMATMUL ... panels=W: the float product with b in column panels of W columns (tload_panels), so
/// the micro-kernel reads b from one contiguous run per panel instead of one row of the tile after
/// another (rows a tile's width apart share a few sets of the first-level cache and evict each other
/// before the next register block comes back to them).

/// Register block rows of a panel product of NV vectors a row: the float micro-kernel's accumulator
/// count (kMatmulRows x kMatmulVecs), as rows of NV vectors.
template <int64_t NV>
constexpr int64_t kPanelRows = kMatmulRows * kMatmulVecs / NV > 0 ? kMatmulRows * kMatmulVecs / NV : 1;

/// Bytes of a's rows one chunk of a panel product multiplies by every panel before the next chunk:
/// they stay in the core's second-level cache while the panels stream past. Generated code defines
/// it from its Target (a quarter of the L2); code that includes the header by itself gets 128 KiB.
#ifndef PTO_MATMUL_CHUNK_BYTES
#define PTO_MATMUL_CHUNK_BYTES 131072
#endif

/// One L0 block of a panel product: d (M0 x N0, row stride NS) = or += a (the block's `rows` <= M0
/// valid rows of K0, row stride KA) @ the block's N0 / W panels (K0 rows each, one panel every
/// PS floats). a's rows go in chunks of PTO_MATMUL_CHUNK_BYTES, each multiplied by every panel.
template <bool ACC, int64_t M0, int64_t K0, int64_t N0, int64_t KA, int64_t NS, int64_t PS, int64_t W>
__attribute__((noinline)) PTO_CONTRACT void matmul_panels_block(float* __restrict d, const float* __restrict a,
                                                                const float* __restrict bp, int64_t rows) {
  PTO_CONTRACT_BODY
  constexpr int64_t NV = W / kVecFloats, RB = kPanelRows<NV>;
  constexpr int64_t fit = PTO_MATMUL_CHUNK_BYTES / (K0 * static_cast<int64_t>(sizeof(float))) / RB * RB;
  constexpr int64_t MC = fit < RB ? RB : fit > M0 ? M0 : fit;
  if (rows == M0) {
    constexpr int64_t chunks = M0 / MC, last = M0 % MC;
    for (int64_t c = 0; c < chunks; ++c)
      for (int64_t j = 0; j < N0 / W; ++j)
        matmul_column_block<NV, ACC, MC, K0, NS, KA, W, RB>(d + c * MC * NS + j * W, a + c * MC * KA, bp + j * PS);
    if constexpr (last > 0)
      for (int64_t j = 0; j < N0 / W; ++j)
        matmul_column_block<NV, ACC, last, K0, NS, KA, W, RB>(d + chunks * MC * NS + j * W, a + chunks * MC * KA,
                                                             bp + j * PS);
    return;
  }
  for (int64_t c0 = 0; c0 < rows; c0 += MC) {
    const int64_t c1 = c0 + MC < rows ? c0 + MC : rows;
    for (int64_t j = 0; j < N0 / W; ++j) {
      int64_t i0 = c0;
      for (; i0 + RB <= c1; i0 += RB)
        matmul_block<RB, NV, ACC, K0, NS, KA, W>(d + i0 * NS + j * W, a + i0 * KA, bp + j * PS);
      if (i0 < c1)
        matmul_block_of<NV, ACC, K0, NS, KA, W, RB - 1>(d + i0 * NS + j * W, a + i0 * KA, bp + j * PS, c1 - i0);
    }
  }
}

/// TMATMUL / TMATMUL_ACC ... panels=W: dst (M x N) = or += a (M x K) @ b, b the K x N float tile in
/// column panels of W columns (tload_panels), blocked by the L0 cube tile (M0, K0, N0) as tmatmul is.
/// `rows` as in tmatmul; `cols` bounds the product by L0 blocks (a TMATMUL zeroes the columns past
/// them); the operands are whole tiles (lda, ldb unused).
template <bool ACC, int64_t M, int64_t K, int64_t N, int64_t M0, int64_t K0, int64_t N0, int64_t W>
inline PTO_CONTRACT void tmatmul_panels(float* __restrict dst, const float* __restrict a, const float* __restrict bp,
                                        int64_t rows = M, int64_t lda = K, int64_t ldb = N, int64_t cols = N) {
  PTO_CONTRACT_BODY
  static_assert(M % M0 == 0 && K % K0 == 0 && N % N0 == 0, "the L0 cube tile must divide the tile");
  static_assert(W > 0 && N0 % W == 0, "the L0 cube tile's n is a whole number of panels");
  (void)lda, (void)ldb;
  rows = rows < 0 ? 0 : rows > M ? M : rows;
  cols = cols < 0 ? 0 : cols > N ? N : cols;
  if (!ACC && rows < M) memset(dst + rows * N, 0, sizeof(float) * (M - rows) * N);
  if constexpr (W % kVecFloats != 0) {
    // Panels narrower than whole vectors (written by hand for another target): element by element.
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        float sum = ACC ? dst[i * N + j] : 0.0f;
        for (int64_t k = 0; k < K; ++k) sum += a[i * K + k] * bp[(j / W) * K * W + k * W + j % W];
        dst[i * N + j] = sum;
      }
  } else {
    for (int64_t k0 = 0; k0 < K; k0 += K0)
      for (int64_t j0 = 0; j0 < cols; j0 += N0)
        for (int64_t i0 = 0; i0 < rows; i0 += M0) {
          float* d = dst + i0 * N + j0;
          const float* ab = a + i0 * K + k0;
          const float* bb = bp + j0 * K + k0 * W;  // panel j0 / W, from its row k0
          const int64_t r = rows - i0 < M0 ? rows - i0 : M0;
          if (ACC || k0 > 0) matmul_panels_block<true, M0, K0, N0, K, N, K * W, W>(d, ab, bb, r);
          else matmul_panels_block<false, M0, K0, N0, K, N, K * W, W>(d, ab, bb, r);
        }
  }
  if (!ACC && cols < N)
    for (int64_t i = 0; i < rows; ++i) memset(dst + i * N + cols, 0, sizeof(float) * (N - cols));
}

/// The sum of a vector's lanes.
inline float vsum(vfloat v) {
  float s = 0.0f;
  for (int64_t l = 0; l < kVecFloats; ++l) s += v[l];
  return s;
}

/// kVecFloats elements of b at p as floats: float as it is, bf16 widened (its bits are the top half
/// of a float's), so a bf16 weight is read in its own two bytes.
inline vfloat vload_as_float(const float* p) { return vload(p); }
inline vfloat vload_as_float(const bf16* p) {
  typedef uint16_t vhalf __attribute__((vector_size(kVecFloats * sizeof(uint16_t))));
  typedef uint32_t vword __attribute__((vector_size(kVecFloats * sizeof(uint32_t))));
  vhalf h;
  memcpy(&h, p, sizeof h);
  const vword w = __builtin_convertvector(h, vword) << 16;
  vfloat f;
  memcpy(&f, &w, sizeof f);
  return f;
}

#if PTO_BF16_DOT
static_assert(kVecFloats == 16, "bf16 dot products are an AVX-512 library's (PTO_BF16_DOT needs PTO_ISA 4)");
typedef int32_t vbf16_pairs __attribute__((vector_size(64)));

/// acc + the sum over each lane's pair of a[2l] * b[2l] + a[2l + 1] * b[2l + 1] (VDPBF16PS).
inline vfloat dot_bf16_pairs(vfloat acc, vbf16_pairs a, vbf16_pairs b) {
  __asm__("vdpbf16ps %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
  return acc;
}
#endif

/// Register blocks of the b_trans product: kBtRows rows of a by kBtCols rows of b. A bf16 product of
/// at most kBtDotRows rows (expand_tiles' few rows, kFewRows) runs these blocks; more, the packed kernels.
constexpr int64_t kBtRows = 4, kBtCols = 4, kBtDotRows = 8;

/// The rows of bt a block of the b_trans product prefetches while it multiplies: `rows` rows (at
/// most kBtCols) of row stride ldb from `first`, every `every`-th one (the rows the next column
/// block reads, shared among the row blocks that read the current one).
template <typename SB>
struct BtPrefetch {
  const SB* first = nullptr;
  int64_t ldb = 0, rows = 0, every = 1;
};

/// TMATMUL ... b_trans, one block: d (MR x NR, row stride N) = or += a (MR rows of K, row stride
/// lda) @ bt^T for NR rows of bt (row stride ldb; float, or bf16 widened as it is read): MR x NR
/// vector accumulators of products along K, their lanes summed at the end, the K tail in scalars.
/// A bf16 a with a bf16 bt takes 32 k a VDPBF16PS where the target has it (pairs of k are adjacent
/// in both rows), else is widened as it is read too. Each step along K also prefetches the same k
/// of the rows `pf` names, so the next block's weight rows arrive from memory while this one
/// multiplies (a weight is read once, from DRAM: its latency is not hidden by reuse).
template <int64_t MR, int64_t NR, bool ACC, int64_t K, int64_t N, typename SB, typename SA>
inline PTO_CONTRACT void matmul_bt_block(float* __restrict d, const SA* __restrict a, int64_t lda,
                                         const SB* __restrict bt, int64_t ldb, const BtPrefetch<SB>& pf) {
  PTO_CONTRACT_BODY
  vfloat acc[MR][NR];
  for (int64_t i = 0; i < MR; ++i)
    for (int64_t j = 0; j < NR; ++j) acc[i][j] = vfloat{};
  const SB* pf_row[kBtCols];
  int64_t npf = 0;
  for (int64_t j = 0; j < pf.rows && npf < kBtCols; j += pf.every) pf_row[npf++] = pf.first + j * pf.ldb;
  int64_t k = 0;
#if PTO_BF16_DOT
  if constexpr (std::is_same<SA, bf16>::value && std::is_same<SB, bf16>::value) {
    for (; k + 32 <= K; k += 32) {
      for (int64_t q = 0; q < npf; ++q) __builtin_prefetch(pf_row[q] + k, 0, 3);
      vbf16_pairs bv[NR];
      for (int64_t j = 0; j < NR; ++j) memcpy(&bv[j], bt + j * ldb + k, sizeof bv[j]);
      for (int64_t i = 0; i < MR; ++i) {
        vbf16_pairs av;
        memcpy(&av, a + i * lda + k, sizeof av);
        for (int64_t j = 0; j < NR; ++j) acc[i][j] = dot_bf16_pairs(acc[i][j], av, bv[j]);
      }
    }
  }
#endif
  for (; k + kVecFloats <= K; k += kVecFloats) {
    // A line is 64 bytes: a float step reads one line of each row, a widened bf16 step half.
    if (sizeof(SB) == 4 || k % 32 == 0)
      for (int64_t q = 0; q < npf; ++q) __builtin_prefetch(pf_row[q] + k, 0, 3);
    vfloat bv[NR];
    for (int64_t j = 0; j < NR; ++j) bv[j] = vload_as_float(bt + j * ldb + k);
    for (int64_t i = 0; i < MR; ++i) {
      const vfloat av = vload_as_float(a + i * lda + k);
      for (int64_t j = 0; j < NR; ++j) acc[i][j] += av * bv[j];
    }
  }
  for (int64_t i = 0; i < MR; ++i)
    for (int64_t j = 0; j < NR; ++j) {
      float sum = vsum(acc[i][j]);
      for (int64_t kk = k; kk < K; ++kk) sum += cvt<float>(a[i * lda + kk]) * cvt<float>(bt[j * ldb + kk]);
      d[i * N + j] = ACC ? d[i * N + j] + sum : sum;
    }
}

/// Rows [0, r) (r <= kBtRows, at run time) of one column block of NR rows of bt.
template <int64_t NR, bool ACC, int64_t K, int64_t N, typename SB, typename SA, int64_t R = kBtRows>
inline void matmul_bt_rows(float* __restrict d, const SA* __restrict a, int64_t lda, const SB* __restrict bt,
                           int64_t ldb, int64_t r, const BtPrefetch<SB>& pf) {
  if constexpr (R > 0) {
    if (r == R) return matmul_bt_block<R, NR, ACC, K, N, SB, SA>(d, a, lda, bt, ldb, pf);
    matmul_bt_rows<NR, ACC, K, N, SB, SA, R - 1>(d, a, lda, bt, ldb, r, pf);
  }
}

/// TMATMUL / TMATMUL_ACC ... b_trans: dst (M x N) = or += a (M x K) @ bt^T with bt the [N, K] tile
/// (a weight in nn.Linear's [out, in] layout, loaded row by row as it lies in memory). Made by
/// expand_tiles for products of few rows, where the transposing load of b would cost more than the
/// product: here every element of b is read once, in order. A float product may take a bf16 b
/// (SB), widened as it is read: a bf16 weight moves half the bytes and is not converted by its
/// load. bf16 a and bt of a float product (SA, deduced) multiply by bf16 dot products: along k of
/// both rows here for a tile of at most kBtDotRows rows (a decode step), else by tmatmul_bf16's
/// packed kernels (pairs of k adjacent in bt's rows). `rows` as in tmatmul; lda and ldb the rows'
/// pitches (a strided view's).
template <bool ACC, typename T, int64_t M, int64_t K, int64_t N, typename SB = T, typename SA = T>
__attribute__((noinline)) PTO_CONTRACT void tmatmul_bt(T* __restrict dst, const SA* __restrict a,
                                                       const SB* __restrict bt, int64_t rows = M,
                                                       int64_t lda = K, int64_t ldb = K, int64_t cols = N) {
  PTO_CONTRACT_BODY
  static_assert(std::is_same<SA, T>::value || (std::is_same<T, float>::value && std::is_same<SA, bf16>::value &&
                                               std::is_same<SB, bf16>::value),
                "an a of another type than the product's is a float product's bf16, with a bf16 b");
  if constexpr (!std::is_same<SA, T>::value && M > kBtDotRows) {
    tmatmul_bf16<ACC, M, K, N, true>(dst, a, bt, rows, lda, ldb, cols);
  } else {
    rows = rows < 0 ? 0 : rows > M ? M : rows;
    cols = cols < 0 ? 0 : cols > N ? N : cols;
    if (!ACC) memset(dst + rows * N, 0, sizeof(T) * (M - rows) * N);
    if (!ACC && cols < N)
      for (int64_t i = 0; i < rows; ++i) memset(dst + i * N + cols, 0, sizeof(T) * (N - cols));
    if constexpr (std::is_same<T, float>::value) {
      // Column blocks outside, row blocks inside: a block of bt's rows is read from memory once
      // and stays in L1 for every row block; the row blocks of one column block share the
      // prefetch of the next column block's rows (row q by row block q mod their number).
      const int64_t passes = (rows + kBtRows - 1) / kBtRows;
      for (int64_t j0 = 0; j0 < cols;) {
        const int64_t nr = cols - j0 >= kBtCols ? kBtCols : 1, next = j0 + nr;
        const int64_t next_rows = cols - next >= kBtCols ? kBtCols : cols - next > 0 ? 1 : 0;
        for (int64_t i0 = 0, p = 0; i0 < rows; i0 += kBtRows, ++p) {
          const int64_t r = rows - i0 < kBtRows ? rows - i0 : kBtRows;
          const BtPrefetch<SB> pf{bt + (next + p) * ldb, ldb, next_rows - p, passes};
          if (nr == kBtCols)
            matmul_bt_rows<kBtCols, ACC, K, N, SB, SA>(dst + i0 * N + j0, a + i0 * lda, lda, bt + j0 * ldb, ldb, r, pf);
          else
            matmul_bt_rows<1, ACC, K, N, SB, SA>(dst + i0 * N + j0, a + i0 * lda, lda, bt + j0 * ldb, ldb, r, pf);
        }
        j0 = next;
      }
    } else {
      (void)lda, (void)ldb;  // integer products read whole tiles
      static_assert(std::is_same<T, SB>::value, "a b of another type than the product's is a float product's bf16");
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) {
          T sum = T(0);
          for (int64_t k = 0; k < K; ++k) sum = wrapping_add(sum, wrapping_mul(a[i * K + k], bt[j * K + k]));
          dst[i * N + j] = ACC ? wrapping_add(dst[i * N + j], sum) : sum;
        }
    }
  }
}

}  // namespace pto
