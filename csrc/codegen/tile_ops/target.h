// The tile library's variant. Generated code defines PTO_ISA (1 generic, 2 SSE, 3 AVX2 + FMA,
// 4 AVX-512; the TileLibrary of its CPU target) and PTO_VECTOR_BYTES before this header; code that
// includes the header by itself (pypto's C++ tests) gets them from the compiler's ISA macros.
#ifndef PTO_ISA
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define PTO_ISA 4
#elif defined(__AVX2__) && defined(__FMA__)
#define PTO_ISA 3
#elif defined(__SSE2__)
#define PTO_ISA 2
#else
#define PTO_ISA 1
#endif
#endif
#ifndef PTO_VECTOR_BYTES
#define PTO_VECTOR_BYTES (PTO_ISA == 4 ? 64 : PTO_ISA == 3 ? 32 : 16)
#endif
// Fused multiply-add instructions: AVX2 targets and up on x86, always on AArch64.
#if PTO_ISA >= 3 || defined(__aarch64__) || (defined(__FMA__) && PTO_ISA != 1)
#define PTO_HAS_FMA 1
#else
#define PTO_HAS_FMA 0
#endif
// The float matmul micro-kernel's register block (rows x vectors of accumulators): 16 of 32
// vector registers on AVX-512 and AArch64, 12 of 16 on AVX2, SSE and generic x86 (with two
// vectors of b and a broadcast, a larger block spills).
#ifndef PTO_MATMUL_ROWS
#if PTO_ISA == 4 || defined(__aarch64__)
#define PTO_MATMUL_ROWS 8
#else
#define PTO_MATMUL_ROWS 6
#endif
#endif
#ifndef PTO_MATMUL_VECS
#define PTO_MATMUL_VECS 2
#endif
// Vector registers: 32 on AVX-512 and AArch64, 16 on the other x86 variants.
#ifndef PTO_VECTOR_REGS
#if PTO_ISA == 4 || defined(__aarch64__)
#define PTO_VECTOR_REGS 32
#else
#define PTO_VECTOR_REGS 16
#endif
#endif
// Int8 dot products (AVX512-VNNI's VPDPBUSD: four u8 x s8 products and their sum into each int32
// lane) in the AVX-512 variant, where the target has them: generated code defines it from its
// Target's features; code that includes the header by itself gets it from the compiler's macro.
#ifndef PTO_INT8_DOT
#if PTO_ISA == 4 && defined(__AVX512VNNI__)
#define PTO_INT8_DOT 1
#else
#define PTO_INT8_DOT 0
#endif
#endif
// bf16 dot products for bf16 operands of a float matmul (tile_ops/matmul_bf16.h): 2 AMX-BF16 tiles,
// 1 AVX512-BF16's VDPBF16PS, 0 none (widened to floats). Generated code defines it from its Target.
#ifndef PTO_BF16_DOT
#if PTO_ISA == 4 && defined(__AVX512BF16__) && defined(__AMX_BF16__) && defined(__AMX_TILE__) && defined(__linux__)
#define PTO_BF16_DOT 2
#elif PTO_ISA == 4 && defined(__AVX512BF16__)
#define PTO_BF16_DOT 1
#else
#define PTO_BF16_DOT 0
#endif
#endif
#define PTO_ISA_SSE 2
#define PTO_ISA_AVX2 3
#define PTO_ISA_AVX512 4

// Streaming (non-temporal) stores in the x86 variants, through compiler builtins: <immintrin.h>
// would cost most of a kernel's compile time. The generic variant is portable C++ and vector
// extensions.
#if PTO_ISA >= PTO_ISA_SSE && (defined(__GNUC__) || defined(__clang__))
#define PTO_STREAM_STORES 1
#endif

// GCC's two-source __builtin_shuffle (constant lane permutations of vector-extension vectors): the
// scans and the transposing load use it; other compilers run their scalar forms.
#if defined(__GNUC__) && !defined(__clang__)
#define PTO_HAS_SHUFFLE 1
#endif
