/// Element types of tensors and tiles.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace pypto {

/// Element type; the order is part of the Python API (pypto.DataType values), so new types go
/// at the end. The FP8 formats are storage types (tiles compute them in FP32): E4M3 without
/// infinities (finite values saturate at +-448, as torch's float8_e4m3fn), E5M2 with them, and
/// E8M0, an unsigned power of two (torch's float8_e8m0fnu). HF8 is HiFloat8, a tapered 8-bit
/// float (a prefix-coded field sets how many bits the exponent takes) that torch has no type for:
/// it travels in uint8 tensors. The 4-bit types INT4 (two's complement, -8..7), FP4_E2M1 (OCP MX:
/// +-0, 0.5 .. 6, no infinity or NaN) and FP4_E1M2 (+-0, 0.25 .. 1.75, an even grid) take one byte
/// per element inside a program (the code in the low nibble); arrays outside a program pack two
/// per byte, the first element in the low nibble (see `packed_dtype`). FP4_E2M1X2 and FP4_E1M2X2
/// are one byte holding such a pair: storage only, read as their 4-bit type to compute. HF4 is a
/// name PyPTO reserves with no encoding defined; no tensor has it, nor BOTTOM, PyPTO's
/// placeholder for "no type".
enum class DataType : uint8_t {
  FP32, FP16, BF16, DOUBLE, INT8, INT16, INT32, INT64, UINT8, BOOL,
  UINT16, UINT32, UINT64, FP8E4M3, FP8E5M2, FP8E8M0, HF8,
  INT4, FP4_E2M1, FP4_E1M2, FP4_E2M1X2, FP4_E1M2X2, HF4, BOTTOM
};

/// Every element type a tensor can have (all but BOTTOM), in enum order.
const std::vector<DataType>& all_dtypes();
/// The type whose .pto name (dtype_pto_name) is `name`, if any.
std::optional<DataType> dtype_by_pto_name(std::string_view name);

/// Raises UserError naming `what` when `dt` is BOTTOM, which no tensor can have, and
/// NotSupportedError for HF4, whose encoding PyPTO does not define.
void check_storage_dtype(DataType dt, std::string_view what);
/// True for the 4-bit types that arrays outside a program pack two per byte (INT4, FP4_E2M1,
/// FP4_E1M2).
bool packed_dtype(DataType dt);
/// True for the types that hold two 4-bit values per element (FP4_E2M1X2, FP4_E1M2X2).
bool pair_dtype(DataType dt);
/// The 4-bit type a pair type holds two of.
DataType pair_element(DataType dt);
/// Bytes per element.
int dtype_size(DataType dt);
/// Python-facing name, e.g. "DT_FP32".
std::string dtype_name(DataType dt);
/// Short name used in .pto types, e.g. "f32".
std::string dtype_pto_name(DataType dt);
/// C++ element type used for storage in generated code.
std::string dtype_cpp_type(DataType dt);
/// True for the floating-point types.
bool dtype_is_float(DataType dt);
/// True for the integer types (not bool).
bool dtype_is_int(DataType dt);
/// The type tiles of `dt` compute in: FP32 for FP32 and the narrower floats, DOUBLE, INT64
/// for INT64, UINT32 and UINT64 (UINT64 values from 2^63 up wrap: exact in addition,
/// subtraction and multiplication, not in comparisons, division or conversion to float), and
/// INT32 for the narrower integers and BOOL.
DataType compute_dtype(DataType dt);
/// The result type of a binary op on two tensors, as torch promotes them.
DataType promote_types(DataType a, DataType b);
/// The result type of a binary op on a tensor and a Python scalar (torch's
/// rule: the scalar only matters when it is of a higher category).
DataType promote_with_scalar(DataType t, bool scalar_is_float, bool scalar_is_bool);

}  // namespace pypto
