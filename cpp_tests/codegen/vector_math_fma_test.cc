// Accuracy of the vectorisable float math (pto::vm) as the AVX2 and AVX-512 CPU targets compile it:
// with fused multiply-adds (this file is compiled with -mavx2 -mfma; CMakeLists.txt). Its namespace
// is renamed so its inline functions do not merge at link time with those of the portable variant
// (vector_math_test.cc and the other tests): without inlining, as in the -O0 sanitizer build, the
// linker would otherwise keep one variant's definition for both.
#define pto pto_fma
#define PTO_ISA 3
#define PTO_VECTOR_BYTES 32
#define VM_SUITE VectorMathFmaTest
#define VM_ERF_ULPS 2
#include "vector_math_cases.inc"
