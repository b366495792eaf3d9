// Accuracy of the vectorisable float math (pto::vm) as the generic and SSE CPU targets compile it:
// without fused multiply-add instructions (PTO_ISA 1: portable code).
#define PTO_ISA 1
#define PTO_VECTOR_BYTES 16
#define VM_SUITE VectorMathTest
#define VM_ERF_ULPS 3
#include "vector_math_cases.inc"
