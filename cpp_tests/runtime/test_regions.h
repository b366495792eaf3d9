// Region builders shared by the runtime tests.
#ifndef PYPTO_CPP_TESTS_RUNTIME_TEST_REGIONS_H_
#define PYPTO_CPP_TESTS_RUNTIME_TEST_REGIONS_H_

#include <cstdint>

#include "runtime/pypto_abi.h"

namespace pypto::runtime::testing {

/// A 2-D box of a view of float allocation `buffer`: the view's element (0, 0) is `base_offset`
/// elements into the allocation and its strides are (s0, s1). A null `buffer` is never passed:
/// use Region2D for regions that name their allocation by base alone.
inline pypto_region StridedBox(void* buffer, int64_t base_offset, int64_t s0, int64_t s1, int64_t r0, int64_t c0,
                               int64_t rows, int64_t cols) {
  pypto_region r{};
  r.base = static_cast<float*>(buffer) + base_offset;
  r.buffer = buffer;
  r.ndim = 2;
  r.elem_size = 4;
  r.offset[0] = r0;
  r.offset[1] = c0;
  r.extent[0] = rows;
  r.extent[1] = cols;
  r.stride[0] = s0;
  r.stride[1] = s1;
  return r;
}

/// A row-major box of a float buffer whose rows are `row_stride` elements apart.
inline pypto_region Region2D(void* base, int64_t r0, int64_t c0, int64_t rows, int64_t cols, int64_t row_stride) {
  pypto_region r = StridedBox(base, 0, row_stride, 1, r0, c0, rows, cols);
  r.buffer = nullptr;
  return r;
}

/// A contiguous 1-D range of a buffer of `elem_size`-byte elements.
inline pypto_region Region1D(void* base, int64_t offset, int64_t extent, int32_t elem_size = 4) {
  pypto_region r{};
  r.base = base;
  r.ndim = 1;
  r.elem_size = elem_size;
  r.offset[0] = offset;
  r.extent[0] = extent;
  r.stride[0] = 1;
  return r;
}

}  // namespace pypto::runtime::testing

#endif  // PYPTO_CPP_TESTS_RUNTIME_TEST_REGIONS_H_
