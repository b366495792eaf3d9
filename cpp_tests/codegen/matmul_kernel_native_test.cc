// The tile matmul as this CPU's variant of the tile library compiles it (AVX2 or AVX-512, with
// AVX512-VNNI's int8 dot products where the CPU has them): this file is compiled with
// -march=native (CMakeLists.txt). Its namespace is renamed so its templates do not merge with the
// baseline build's (matmul_kernel_test.cc) at link time.
#define pto pto_native
#define MM_SUITE MatmulKernelNativeTest
#include "matmul_kernel_cases.inc"
