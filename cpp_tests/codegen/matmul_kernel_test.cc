// The tile matmul as the baseline x86-64 build compiles it (the SSE variant of the tile library).
#define MM_SUITE MatmulKernelTest
#include "matmul_kernel_cases.inc"
