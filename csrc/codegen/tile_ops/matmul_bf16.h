// TMATMUL of bf16 operands into an fp32 product by bf16 dot products: AMX-BF16 tiles
// (PTO_BF16_DOT 2) or AVX512-BF16's VDPBF16PS (PTO_BF16_DOT 1, and where the OS refuses a process
// the AMX state). Part of codegen/tile_ops.h, which includes the parts in order.
//
// Both multiply the same packed b: panels of 16 columns, each KP/2 rows of 16 32-bit words, a word
// holding the bf16 pair (b[2p][j], b[2p+1][j]) (low half, high half), rows past K and columns past N
// zero. Each instruction sums pairs of products: the order of the fp32 additions differs from the
// float micro-kernel's one product at a time, and bf16 denormals count as zero (both instructions
// treat them so), as they do in torch's oneDNN bf16 products.

namespace pto {

#if PTO_BF16_DOT

/// The packed b of `b` (K x N bf16, row stride NS): NP / 16 panels of KP / 2 rows of 16 words.
inline void pack_bf16_pairs(uint32_t* __restrict out, const bf16* __restrict b, int64_t K, int64_t N, int64_t NS,
                            int64_t KP, int64_t NP) {
  for (int64_t p = 0; p < NP / 16; ++p) {
    uint32_t* __restrict panel = out + p * (KP / 2) * 16;
    const int64_t j0 = p * 16;
    const int64_t w = N - j0 < 16 ? N - j0 : 16;
    for (int64_t kp = 0; kp < KP / 2; ++kp) {
      uint32_t* __restrict row = panel + kp * 16;
      const int64_t k = 2 * kp;
      if (w == 16 && k + 1 < K) {
        const uint16_t* __restrict r0 = &b[k * NS + j0].bits;
        const uint16_t* __restrict r1 = r0 + NS;
        for (int64_t c = 0; c < 16; ++c) row[c] = static_cast<uint32_t>(r0[c]) | static_cast<uint32_t>(r1[c]) << 16;
        continue;
      }
      for (int64_t c = 0; c < 16; ++c) {
        const uint32_t lo = c < w && k < K ? b[k * NS + j0 + c].bits : 0;
        const uint32_t hi = c < w && k + 1 < K ? b[(k + 1) * NS + j0 + c].bits : 0;
        row[c] = lo | hi << 16;
      }
    }
  }
}

typedef uint32_t vwords16 __attribute__((vector_size(64)));

/// dst (16 rows of 16 words, row stride 16) = the transpose of the 16 x 16 words at src (row stride
/// ss): four rounds of interleaving row i with row i + 8 transpose a 16 x 16 matrix.
inline void transpose_words16(uint32_t* __restrict dst, const uint32_t* __restrict src, int64_t ss) {
  vwords16 r[16], t[16];
  for (int i = 0; i < 16; ++i) memcpy(&r[i], src + i * ss, sizeof r[i]);
  for (int round = 0; round < 4; ++round) {
    for (int i = 0; i < 8; ++i) {
      t[2 * i] = __builtin_shufflevector(r[i], r[i + 8], 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
      t[2 * i + 1] =
          __builtin_shufflevector(r[i], r[i + 8], 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    }
    for (int i = 0; i < 16; ++i) r[i] = t[i];
  }
  for (int i = 0; i < 16; ++i) memcpy(dst + i * 16, &r[i], sizeof r[i]);
}

/// The packed b of bt^T, with `bt` the N x K bf16 tile (row stride KS) of a transposed b: a pair of
/// k is adjacent in a row of bt, so a panel is a transpose of the words of 16 rows.
inline void pack_bf16_pairs_transposed(uint32_t* __restrict out, const bf16* __restrict bt, int64_t K, int64_t N,
                                       int64_t KS, int64_t KP, int64_t NP) {
  // Words of a row transposed by blocks (where pairs and rows start on whole words).
  const int64_t whole_k = K % 2 == 0 && KS % 2 == 0 ? K / 2 / 16 * 16 : 0;
  for (int64_t p = 0; p < NP / 16; ++p) {
    uint32_t* __restrict panel = out + p * (KP / 2) * 16;
    const int64_t j0 = p * 16;
    const int64_t w = N - j0 < 16 ? N - j0 : 16;
    int64_t kp = 0;
    if (w == 16)
      for (; kp < whole_k; kp += 16)
        transpose_words16(panel + kp * 16, reinterpret_cast<const uint32_t*>(bt + j0 * KS) + kp, KS / 2);
    for (; kp < KP / 2; ++kp)
      for (int64_t c = 0; c < 16; ++c) {
        const int64_t k = 2 * kp;
        const uint32_t lo = c < w && k < K ? bt[(j0 + c) * KS + k].bits : 0;
        const uint32_t hi = c < w && k + 1 < K ? bt[(j0 + c) * KS + k + 1].bits : 0;
        panel[kp * 16 + c] = lo | hi << 16;
      }
  }
}

/// One register block of the VDPBF16PS micro-kernel: kBf16Rows rows of two panels (32 columns).
constexpr int64_t kBf16Rows = 8;
// vbf16_pairs and dot_bf16_pairs (VDPBF16PS) are matmul.h's (its b_trans product of few rows uses them).

// The accumulators stay in registers only when the loops over rows are unrolled.
#if defined(__clang__)
#define PTO_UNROLL _Pragma("clang loop unroll(full)")
#else
#define PTO_UNROLL _Pragma("GCC unroll 16")
#endif

/// Lines a block of the VDPBF16PS micro-kernel prefetches while it multiplies, spread evenly over
/// its steps along k: `lines` lines (64 bytes) from each of `rows` rows `stride` bytes apart from
/// `first` (none where rows is 0), into L1 (T0: the next block's rows of a, read in place) or L2
/// (the source of the next pair of panels, packed while its lines are in cache).
struct Bf16Prefetch {
  const char* first = nullptr;
  int64_t stride = 0, rows = 0, lines = 0;
  bool t0 = false;
};

/// c (R x 16P floats, row stride ldc) = (LOAD: c +) a (R rows of KP bf16, row stride lda) @ P packed
/// panels from p (KP / 2 rows of 16 words each, one after another): R x P accumulators, R
/// broadcasts of a pair of a and P loads of b a step along k, and the prefetches `pf` names: a
/// weight read once from memory (as a in a product W @ x^T of few columns, or as the b of the next
/// panels) arrives while these multiply.
template <bool LOAD, int64_t R, int64_t P>
inline void dot_bf16_block(float* __restrict c, int64_t ldc, const bf16* __restrict a, int64_t lda,
                           const uint32_t* __restrict p, int64_t KP, const Bf16Prefetch& pf) {
  static_assert(R * P <= 16, "16 accumulators at most");
  vfloat acc[R][P];
  PTO_UNROLL
  for (int64_t r = 0; r < R; ++r)
    for (int64_t q = 0; q < P; ++q) acc[r][q] = LOAD ? vload(c + r * ldc + 16 * q) : vfloat{};
  // Line `line` of row `row` is next; `due` counts lines owed, in steps (KP / 2 per line).
  const int64_t steps = KP / 2, owed = pf.rows * pf.lines;
  int64_t due = 0, row = 0, line = 0;
  for (int64_t kp = 0; kp < steps; ++kp) {
    for (due += owed; due >= steps && row < pf.rows; due -= steps) {
      const char* at = pf.first + row * pf.stride + line * 64;
      if (pf.t0) __builtin_prefetch(at, 0, 3);
      else __builtin_prefetch(at, 0, 2);
      if (++line == pf.lines) line = 0, ++row;
    }
    vbf16_pairs b[P];
    for (int64_t q = 0; q < P; ++q) memcpy(&b[q], p + (q * (KP / 2) + kp) * 16, sizeof b[q]);
    PTO_UNROLL
    for (int64_t r = 0; r < R; ++r) {
      int32_t pair;
      memcpy(&pair, a + r * lda + 2 * kp, sizeof pair);
      const vbf16_pairs av = vbf16_pairs{} + pair;
      for (int64_t q = 0; q < P; ++q) acc[r][q] = dot_bf16_pairs(acc[r][q], av, b[q]);
    }
  }
  PTO_UNROLL
  for (int64_t r = 0; r < R; ++r)
    for (int64_t q = 0; q < P; ++q) vstore(c + r * ldc + 16 * q, acc[r][q]);
}

/// Rows of the micro-kernel's block of one panel (a last column panel of at most 16 valid columns).
constexpr int64_t kBf16PanelRows = 16;
static_assert(kBf16PanelRows % kBf16Rows == 0, "a tile's rows padded for one-panel blocks cover the pairs' blocks");

#undef PTO_UNROLL

#if PTO_BF16_DOT == 2
/// AMX: the process asks the OS once for the tile-data state (Linux's arch_prctl
/// ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA); false where it refuses (the VDPBF16PS kernel runs).
inline bool amx_permitted() {
  static const bool ok = [] {
    long r;
    __asm__ volatile("syscall" : "=a"(r) : "0"(158L), "D"(0x1023L), "S"(18L) : "rcx", "r11", "memory");
    return r == 0;
  }();
  return ok;
}

/// The tile configuration: palette 1, the eight tiles 16 rows of 64 bytes (C: 16 x 16 floats;
/// A: 16 rows of 32 bf16; B: 16 rows of 16 pairs).
struct alignas(64) AmxConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
  uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
};

#define PTO_TILE_LOAD(t, base, stride) \
  __asm__ volatile("tileloadd (%0,%1,1), %%tmm" #t ::"r"(base), "r"(static_cast<int64_t>(stride)) : "memory")
#define PTO_TILE_STORE(t, base, stride) \
  __asm__ volatile("tilestored %%tmm" #t ", (%0,%1,1)" ::"r"(base), "r"(static_cast<int64_t>(stride)) : "memory")
#define PTO_TILE_DOT(c, a, b) __asm__ volatile("tdpbf16ps %%tmm" #b ", %%tmm" #a ", %%tmm" #c ::: "memory")
#define PTO_TILE_ZERO(t) __asm__ volatile("tilezero %%tmm" #t ::: "memory")

/// c (32 x 32 floats, row stride ldc) = (LOAD: c +) a (32 rows of KP bf16, row stride lda) @ the
/// packed panels p0 and p1: four C tiles (tmm0-3), two of a (tmm4-5), two of b (tmm6-7).
template <bool LOAD>
inline void amx_bf16_block(float* __restrict c, int64_t ldc, const bf16* __restrict a, int64_t lda,
                           const uint32_t* __restrict p0, const uint32_t* __restrict p1, int64_t KP) {
  const int64_t cs = ldc * 4, as = lda * 2;
  float* c1 = c + 16 * ldc;
  if (LOAD) {
    PTO_TILE_LOAD(0, c, cs);
    PTO_TILE_LOAD(1, c + 16, cs);
    PTO_TILE_LOAD(2, c1, cs);
    PTO_TILE_LOAD(3, c1 + 16, cs);
  } else {
    PTO_TILE_ZERO(0);
    PTO_TILE_ZERO(1);
    PTO_TILE_ZERO(2);
    PTO_TILE_ZERO(3);
  }
  const bf16* a1 = a + 16 * lda;
  for (int64_t k = 0; k < KP; k += 32) {
    PTO_TILE_LOAD(4, a + k, as);
    PTO_TILE_LOAD(6, p0 + k * 8, 64);
    PTO_TILE_DOT(0, 4, 6);
    PTO_TILE_LOAD(7, p1 + k * 8, 64);
    PTO_TILE_DOT(1, 4, 7);
    PTO_TILE_LOAD(5, a1 + k, as);
    PTO_TILE_DOT(2, 5, 6);
    PTO_TILE_DOT(3, 5, 7);
  }
  PTO_TILE_STORE(0, c, cs);
  PTO_TILE_STORE(1, c + 16, cs);
  PTO_TILE_STORE(2, c1, cs);
  PTO_TILE_STORE(3, c1 + 16, cs);
}
#undef PTO_TILE_LOAD
#undef PTO_TILE_STORE
#undef PTO_TILE_DOT
#undef PTO_TILE_ZERO
#endif  // PTO_BF16_DOT == 2

/// d (M x N floats) = or += a (M x K bf16) @ b (K x N bf16; BT: b^T, the N x K tile of a transposed
/// b), rows past `rows` and columns past `cols` not multiplied (a TMATMUL zeroes them). Pair by pair
/// of panels (32 columns): the pair is packed, then multiplied by blocks of RB rows, or, for a last
/// pair with at most 16 valid columns, one panel by blocks of kBf16PanelRows rows; a block that
/// crosses the valid rows or columns runs in a buffer. The blocks of one pair prefetch the next
/// pair's columns of b into L2, shared among them, so a weight streamed from memory arrives while the
/// pair before it multiplies. a is copied, zero-padded, where K is not a whole number of the
/// kernel's k step or the blocks' rows reach past the tile's.
template <bool ACC, int64_t M, int64_t K, int64_t N, bool AMX, bool BT>
bool matmul_bf16_dot(float* __restrict d, const bf16* __restrict a, const bf16* __restrict b, int64_t rows,
                     int64_t lda_in, int64_t ldb, int64_t cols) {
  constexpr int64_t RB = AMX ? 32 : kBf16Rows, KS = AMX ? 32 : 2;
  constexpr int64_t KP = (K + KS - 1) / KS * KS;
  // Panels of the valid columns; the last pair may be one panel (AMX multiplies whole pairs).
  const int64_t NP = (cols + (AMX ? 31 : 15)) / (AMX ? 32 : 16) * (AMX ? 32 : 16);
  const int64_t rb_most = NP % 32 != 0 ? kBf16PanelRows : RB;  // the largest block of rows run
  const int64_t MP = (rows + rb_most - 1) / rb_most * rb_most;
  const bool pad_a = KP != K || MP > M;
  const int64_t b_words = KP / 2 * 32;  // one pair of panels
  auto* packed = static_cast<uint32_t*>(matmul_scratch(b_words * 4 + (pad_a ? MP * KP * 2 : 0)));
  if (packed == nullptr) return false;
  const bf16* ap = a;
  int64_t lda = lda_in;
  if (pad_a) {
    auto* pa = reinterpret_cast<bf16*>(packed + b_words);
    for (int64_t i = 0; i < MP; ++i) {
      bf16* __restrict row = pa + i * KP;
      int64_t k = 0;
      if (i < rows)
        for (; k < K; ++k) row[k] = a[i * lda_in + k];
      for (; k < KP; ++k) row[k].bits = 0;
    }
    ap = pa;
    lda = KP;
  }
  alignas(64) float buf[RB * 32 > kBf16PanelRows * 16 ? RB * 32 : kBf16PanelRows * 16];
  for (int64_t j = 0; j < NP; j += 32) {
    const bool pair = NP - j >= 32;
    const int64_t rb = pair ? RB : kBf16PanelRows, bw = pair ? 32 : 16;
    const int64_t w = cols - j < bw ? cols - j : bw;
    if constexpr (BT) {
      pack_bf16_pairs_transposed(packed, b + j * ldb, K, w, ldb, KP, bw);
    } else {
      pack_bf16_pairs(packed, b + j, K, w, ldb, KP, bw);
    }
    const uint32_t* p0 = packed;
    // The next pair's valid columns of b: rows of bt, or a line or two of each row of b.
    const int64_t next_w = cols - j - bw < 32 ? cols - j - bw : 32;
    const int64_t blocks = (rows + rb - 1) / rb;
    for (int64_t i = 0, bi = 0; i < rows; i += rb, ++bi) {
      const int64_t h = rows - i < rb ? rows - i : rb;
      const bool whole = h == rb && w == bw;
      float* c = whole ? d + i * N + j : buf;
      const int64_t ldc = whole ? N : bw;
      if (!whole && ACC) {
        memset(buf, 0, sizeof buf);
        for (int64_t r = 0; r < h; ++r) memcpy(buf + r * bw, d + (i + r) * N + j, sizeof(float) * w);
      }
#if PTO_BF16_DOT == 2
      if constexpr (AMX) {
        amx_bf16_block<ACC>(c, ldc, ap + i * lda, lda, p0, p0 + (KP / 2) * 16, KP);
      } else
#endif
      {
        Bf16Prefetch pf;
        if (next_w > 0) {
          // Row block bi prefetches rows bi, bi + blocks, ... of the next pair's source.
          const int64_t src_rows = BT ? next_w : K, row_bytes = (BT ? K : next_w) * 2;
          const char* first = reinterpret_cast<const char*>(BT ? b + (j + bw) * ldb : b + j + bw);
          pf.first = first + bi * ldb * 2;
          pf.stride = blocks * ldb * 2;
          pf.rows = src_rows > bi ? (src_rows - bi + blocks - 1) / blocks : 0;
          pf.lines = (reinterpret_cast<uintptr_t>(first) % 64 + row_bytes + 63) / 64;
        } else if (!pad_a && NP <= 32 && i + rb < rows) {
          // The next block of a's rows where a is read once, in place (one pair of panels: a
          // W @ x^T of few columns); a's rows read again for more columns, or a padded copy, are
          // in cache.
          pf.first = reinterpret_cast<const char*>(ap + (i + rb) * lda);
          pf.stride = lda * 2;
          pf.rows = rb;
          pf.lines = (reinterpret_cast<uintptr_t>(pf.first) % 64 + K * 2 + 63) / 64;
          pf.t0 = true;
        }
        if (pair)
          dot_bf16_block<ACC, kBf16Rows, 2>(c, ldc, ap + i * lda, lda, p0, KP, pf);
        else
          dot_bf16_block<ACC, kBf16PanelRows, 1>(c, ldc, ap + i * lda, lda, p0, KP, pf);
      }
      if (!whole)
        for (int64_t r = 0; r < h; ++r) memcpy(d + (i + r) * N + j, buf + r * bw, sizeof(float) * w);
    }
  }
  return true;
}

#endif  // PTO_BF16_DOT

/// TMATMUL of bf16 a and b (BT: the N x K tile of a transposed b, TMATMUL ... b_trans) into float d:
/// by dot products where the target has them, else (a program written with such a product for a
/// target without them, or no memory to pack b) by the i-k-j loop, widening each element as it
/// reads it.
template <bool ACC, int64_t M, int64_t K, int64_t N, bool BT>
void tmatmul_bf16(float* __restrict d, const bf16* __restrict a, const bf16* __restrict b, int64_t rows, int64_t lda,
                  int64_t ldb, int64_t cols) {
  if (rows > M) rows = M;
  if (rows < 0) rows = 0;
  if (cols > N) cols = N;
  if (cols < 0) cols = 0;
  if (!ACC && rows < M) memset(d + rows * N, 0, sizeof(float) * (M - rows) * N);
  if (!ACC && cols < N)
    for (int64_t i = 0; i < rows; ++i) memset(d + i * N + cols, 0, sizeof(float) * (N - cols));
  if (rows == 0) return;
#if PTO_BF16_DOT == 2
  if (amx_permitted()) {
    static const AmxConfig config;
    __asm__ volatile("ldtilecfg %0" ::"m"(config));
    const bool done = matmul_bf16_dot<ACC, M, K, N, true, BT>(d, a, b, rows, lda, ldb, cols);
    __asm__ volatile("tilerelease" ::: "memory");
    if (done) return;
  }
#endif
#if PTO_BF16_DOT
  if (matmul_bf16_dot<ACC, M, K, N, false, BT>(d, a, b, rows, lda, ldb, cols)) return;
#endif
  for (int64_t i = 0; i < rows; ++i) {
    float* __restrict drow = d + i * N;
    if (!ACC)
      for (int64_t j = 0; j < cols; ++j) drow[j] = 0.0f;
    for (int64_t k = 0; k < K; ++k) {
      const float av = cvt<float, bf16>(a[i * lda + k]);
      for (int64_t j = 0; j < cols; ++j) drow[j] += av * cvt<float, bf16>(BT ? b[j * ldb + k] : b[k * ldb + j]);
    }
  }
}

}  // namespace pto
