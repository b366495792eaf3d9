// The generic tile copies of one tile-library variant (pypto_abi.h's pypto_tile_copies): TLOAD and
// TSTORE of elements of one type, as bits of 1, 2, 4 or 8 bytes, for a tile width known at run time.
// CMake compiles this file once per variant of the host's architecture, each with its ISA flags,
// PTO_ISA, PTO_VECTOR_BYTES and PYPTO_COPIES_VARIANT (its name); generated kernels call these
// instead of compiling their own copy loops (codegen/tile_copies.cc binds them).
#include "runtime/pypto_abi.h"

// The tile library's inline functions differ between variants (other vector widths and
// instructions): each variant's live in a namespace of its own, so the linker never merges one
// variant's definition into another's.
#define PYPTO_COPIES_CAT2(a, b) a##_##b
#define PYPTO_COPIES_CAT(a, b) PYPTO_COPIES_CAT2(a, b)
#define pto PYPTO_COPIES_CAT(pto_copies, PYPTO_COPIES_VARIANT)
#include "codegen/tile_ops.h"

namespace {

/// TLOAD from elements of type S into a tile of type T.
template <typename T, typename S = T>
void load(void* dst, int64_t cols, int32_t rank, const int64_t* tshape, const void* src, const int64_t* stride,
          const int64_t* valid) {
  pto::tload_rows(static_cast<T*>(dst), cols, rank, tshape, static_cast<const S*>(src), stride, valid);
}

/// TSTORE of a tile of type T into elements of type S.
template <typename T, bool STREAM, typename S = T>
void store(void* dst, const int64_t* stride, const int64_t* valid, int32_t rank, const int64_t* tshape, const void* src,
           int64_t cols) {
  pto::tstore_rows<T, S, STREAM, false>(static_cast<S*>(dst), stride, valid, rank, tshape, static_cast<const T*>(src),
                                        cols);
}

/// TLOAD ... panels of elements of type S into a float tile.
template <typename S>
void load_panels(void* dst, int64_t width, int64_t cols, int32_t rank, const int64_t* tshape, const void* src,
                 const int64_t* stride, const int64_t* valid) {
  pto::tload_panels_rows(static_cast<float*>(dst), width, cols, rank, tshape, static_cast<const S*>(src), stride,
                         valid);
}

}  // namespace

namespace pypto::codegen {

const pypto_tile_copies* PYPTO_COPIES_CAT(tile_copies, PYPTO_COPIES_VARIANT)() {
  static const pypto_tile_copies copies = {
      PYPTO_TILE_COPIES_VERSION,
      {&load<uint8_t>, &load<uint16_t>, &load<uint32_t>, &load<uint64_t>},
      {&store<uint8_t, false>, &store<uint16_t, false>, &store<uint32_t, false>, &store<uint64_t, false>},
      &store<float, true>,
      {&load<float, pto::f16>, &load<float, pto::bf16>},
      {&store<float, false, pto::f16>, &store<float, false, pto::bf16>},
      {&load_panels<float>, &load_panels<pto::f16>, &load_panels<pto::bf16>},
  };
  return &copies;
}

}  // namespace pypto::codegen
