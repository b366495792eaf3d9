// Counter-based random draws: TRANDOM (Philox4x32-10, or Philox4x32-7).
// Part of codegen/tile_ops.h, which includes the parts in order (and nothing else does).

namespace pto {

/// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3"): a bijection of a
/// 128-bit counter under a 64-bit key. Element e of a stream is lane e % 4 of the block whose
/// counter is (e / 4 as the low 64 bits, the stream's counter as the high 64), so any element is
/// computed from its position alone: the values do not depend on how the tensor is tiled, which
/// worker runs a tile, or in which order.
namespace philox {

constexpr uint32_t kMul0 = 0xD2511F53u;
constexpr uint32_t kMul1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u;
constexpr uint32_t kWeyl1 = 0xBB67AE85u;

/// A vector of 64-bit lanes, each holding a 32-bit word of one block (so the products below need
/// no repacking between rounds).
typedef uint64_t Lanes __attribute__((vector_size(PTO_VECTOR_BYTES)));
constexpr int64_t kLanes = PTO_VECTOR_BYTES / 8;
/// Vectors of blocks that go through the rounds side by side: a round is a chain of dependent
/// instructions (product, shift, xor), so one vector alone would wait on its latency.
constexpr int64_t kGroup = 4;

/// Blocks `draw` computes for C elements from any start (whole groups of vectors of blocks).
template <int64_t C>
constexpr int64_t kBlocksFor = (C / 4 + 1 + kGroup * kLanes - 1) / (kGroup * kLanes) * (kGroup * kLanes);

/// (a mod 2^32) * (b mod 2^32) in each lane: one pmuludq on x86 (GCC's vector multiply would make
/// a full 64-bit product of three).
inline Lanes mul_low_words(Lanes a, Lanes b) {
#if defined(__GNUC__) && !defined(__clang__) && PTO_ISA == PTO_ISA_AVX512 && PTO_VECTOR_BYTES == 64
  typedef int V16 __attribute__((vector_size(64)));
  typedef long long V8 __attribute__((vector_size(64)));
  return reinterpret_cast<Lanes>(__builtin_ia32_pmuludq512_mask(reinterpret_cast<V16>(a), reinterpret_cast<V16>(b),
                                                                V8{}, static_cast<unsigned char>(0xff)));
#elif defined(__GNUC__) && !defined(__clang__) && PTO_ISA >= PTO_ISA_AVX2 && PTO_VECTOR_BYTES == 32
  typedef int V8 __attribute__((vector_size(32)));
  return reinterpret_cast<Lanes>(__builtin_ia32_pmuludq256(reinterpret_cast<V8>(a), reinterpret_cast<V8>(b)));
#elif defined(__GNUC__) && !defined(__clang__) && PTO_ISA >= PTO_ISA_SSE && PTO_VECTOR_BYTES == 16
  typedef int V4 __attribute__((vector_size(16)));
  return reinterpret_cast<Lanes>(__builtin_ia32_pmuludq128(reinterpret_cast<V4>(a), reinterpret_cast<V4>(b)));
#else
  return a * b;  // both below 2^32
#endif
}

/// The blocks b0, b0 + 1, ... (kBlocksFor<C> of them; the block number is the low 64 bits of the
/// 128-bit counter, `counter` the high 64) into buf, four words each. kGroup vectors of kLanes
/// blocks go through the Rounds rounds (10, or Philox4x32-7's 7) together, each word of a block in
/// a 64-bit lane of its own vector.
template <int64_t C, int Rounds = 10>
inline void draw_blocks(uint32_t* __restrict buf, uint64_t key, uint64_t counter, uint64_t b0) {
  const Lanes low = Lanes{} + 0xFFFFFFFFu, m0 = Lanes{} + kMul0, m1 = Lanes{} + kMul1;
  Lanes step;
  for (int64_t l = 0; l < kLanes; ++l) step[l] = static_cast<uint64_t>(l);
  for (int64_t b = 0; b < kBlocksFor<C>; b += kGroup * kLanes) {
    Lanes x0[kGroup], x1[kGroup], x2[kGroup], x3[kGroup];
    for (int64_t g = 0; g < kGroup; ++g) {
      const Lanes block = (Lanes{} + (b0 + static_cast<uint64_t>(b + g * kLanes))) + step;
      x0[g] = block & low;
      x1[g] = block >> 32;
      x2[g] = Lanes{} + static_cast<uint32_t>(counter);
      x3[g] = Lanes{} + static_cast<uint32_t>(counter >> 32);
    }
    uint32_t a = static_cast<uint32_t>(key), c = static_cast<uint32_t>(key >> 32);
#pragma GCC unroll 10
    for (int r = 0; r < Rounds; ++r) {
#pragma GCC unroll 4
      for (int64_t g = 0; g < kGroup; ++g) {
        const Lanes p0 = mul_low_words(x0[g], m0), p1 = mul_low_words(x2[g], m1);
        x0[g] = (p1 >> 32) ^ x1[g] ^ a;
        x2[g] = (p0 >> 32) ^ x3[g] ^ c;
        x1[g] = p1 & low;
        x3[g] = p0 & low;
      }
      a += kWeyl0;
      c += kWeyl1;
    }
    for (int64_t g = 0; g < kGroup; ++g)
      for (int64_t l = 0; l < kLanes; ++l) {
        uint32_t* o = buf + 4 * (b + g * kLanes + l);
        o[0] = static_cast<uint32_t>(x0[g][l]);
        o[1] = static_cast<uint32_t>(x1[g][l]);
        o[2] = static_cast<uint32_t>(x2[g][l]);
        o[3] = static_cast<uint32_t>(x3[g][l]);
      }
  }
}

/// The raw 32-bit draws of stream elements [first, first + C) (element e is word e % 4 of block
/// block0 + e / 4, modulo 2^64): returns a pointer into buf (4 * kBlocksFor<C> words) where they start.
template <int64_t C, int Rounds = 10>
inline const uint32_t* draw(uint32_t* __restrict buf, uint64_t key, uint64_t counter, uint64_t first,
                            uint64_t block0 = 0) {
  draw_blocks<C, Rounds>(buf, key, counter, block0 + (first >> 2));
  return buf + (first & 3);
}

/// The uniform value of a raw draw keeping `Bits` mantissa bits: an exact multiple of 2^-Bits in [0, 1).
template <int Bits>
inline float uniform(uint32_t raw) {
  return static_cast<float>(raw & ((1u << Bits) - 1u)) * (1.0f / static_cast<float>(1u << Bits));
}

/// sin(v) and cos(v) for Box-Muller's angle v in [0, 2 pi]: v = q pi/2 + r with q = round(v 2/pi)
/// (0 to 4) and r in double (pi/2 to 107 bits: r is exact to far below a float ulp), then the
/// double kernels of the vector math: the values of vm::sin and vm::cos (one rounding to float at
/// the end) without their reduction for arguments of any size.
inline void sincos_angle(float v, float& s, float& c) {
  const int32_t q = static_cast<int32_t>(v * 0.636619772f + 0.5f);
  const double qd = static_cast<double>(q);
  const double r = (static_cast<double>(v) - qd * 1.5707963267948966) - qd * 6.123233995736766e-17;
  const double sr = vm::sin_kernel(r), cr = vm::cos_kernel(r);
  const double ps = (q & 1) ? cr : sr, pc = (q & 1) ? sr : cr;
  s = static_cast<float>((q & 2) ? -ps : ps);
  c = static_cast<float>(((q + 1) & 2) ? -pc : pc);
}

}  // namespace philox

namespace philox {

/// Elements [at, at + n) of the stream into out: uniform with `Bits` mantissa bits, or (Normal)
/// Box-Muller of the fp32 uniform pairs: elements 2p and 2p + 1 are sin(v) r and cos(v) r with
/// v = 2 pi u(2p + 1) and r = sqrt(-2 log max(u(2p), 1e-7)). Passes of kChunk elements whose loops
/// have compile-time trip counts (a multiple of 16: no scalar remainder loops).
template <typename T, int64_t kChunk, bool Normal, int Bits, int Rounds>
inline void fill(T* __restrict out, int64_t n, uint64_t key, uint64_t counter, uint64_t block0, uint64_t at) {
  for (int64_t done = 0; done < n; done += kChunk, at += kChunk) {
    const int64_t m = n - done < kChunk ? n - done : kChunk;
    if constexpr (!Normal) {
      alignas(64) uint32_t buf[4 * kBlocksFor<kChunk>];
      const uint32_t* raw = draw<kChunk, Rounds>(buf, key, counter, at, block0);
      for (int64_t i = 0; i < m; ++i) out[done + i] = static_cast<T>(uniform<Bits>(raw[i]));
    } else {
      // The pairs the elements [at, at + m) belong to, whole (one more when `at` is odd).
      constexpr int64_t kPairs = kChunk / 2 + 16;
      const uint64_t first = at & ~uint64_t{1};
      alignas(64) uint32_t buf[4 * kBlocksFor<2 * kPairs>];
      const uint32_t* raw = draw<2 * kPairs, Rounds>(buf, key, counter, first, block0);
      alignas(64) float z[2 * kPairs];
      for (int64_t p = 0; p < kPairs; ++p) {
        const float u1 = uniform<23>(raw[2 * p]);
        const float u2 = uniform<23>(raw[2 * p + 1]);
        const float r = fp::sqrt(vm::log(u1 > 1.0e-7f ? u1 : 1.0e-7f) * -2.0f);
        float sv, cv;
        sincos_angle(u2 * 6.28318530717958647692f, sv, cv);
        z[2 * p] = sv * r;
        z[2 * p + 1] = cv * r;
      }
      const float* from = z + (at - first);
      for (int64_t i = 0; i < m; ++i) out[done + i] = static_cast<T>(from[i]);
    }
  }
}

}  // namespace philox

/// TRANDOM: a tile of N elements in rows of C, holding elements of the stream (key, counter). The
/// tile's first element is stream element `base`; row r (its coordinates in the `lead_rank` leading
/// tile dims `lead`) starts at base + the sum of coordinate times `stride` (the tensor's strides in
/// its flattened positions). Rows that continue one another are drawn as one run. Stream element e is
/// word e % 4 of the block whose number (the counter's low 64 bits) is block0 + e / 4, after Rounds
/// rounds (10, or 7 for Philox4x32-7).
template <typename T, int64_t N, int64_t C, bool Normal, int Bits, int Rounds = 10>
inline void trandom(T* __restrict dst, uint64_t key, uint64_t counter, int64_t base, int lead_rank,
                    const int64_t* lead, const int64_t* stride, uint64_t block0 = 0) {
  constexpr int64_t kChunk = N < 512 ? (N + 15) / 16 * 16 : 512;
  int64_t coord[8] = {};
  int64_t run_at = base, run_len = 0, run_dst = 0;
  for (int64_t r = 0; r < N / C; ++r) {
    int64_t start = base;
    for (int d = 0; d < lead_rank; ++d) start += coord[d] * stride[d];
    if (start != run_at + run_len) {
      philox::fill<T, kChunk, Normal, Bits, Rounds>(dst + run_dst, run_len, key, counter, block0,
                                                     static_cast<uint64_t>(run_at));
      run_at = start;
      run_len = 0;
      run_dst = r * C;
    }
    run_len += C;
    for (int d = lead_rank - 1; d >= 0; --d) {
      if (++coord[d] < lead[d]) break;
      coord[d] = 0;
    }
  }
  philox::fill<T, kChunk, Normal, Bits, Rounds>(dst + run_dst, run_len, key, counter, block0,
                                                     static_cast<uint64_t>(run_at));
}

}  // namespace pto
