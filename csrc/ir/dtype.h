/// Element types of tensors and tiles.
#pragma once

#include <cstdint>
#include <string>

namespace pypto {

/// Element type; the order is part of the Python API (pypto.DataType values).
enum class DataType : uint8_t { FP32, FP16, BF16, DOUBLE, INT8, INT16, INT32, INT64, UINT8, BOOL };

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
/// The type tiles of `dt` compute in: FP32 for FP16/BF16/FP32, DOUBLE,
/// INT64, and INT32 for the narrower integers and BOOL.
DataType compute_dtype(DataType dt);
/// The result type of a binary op on two tensors, as torch promotes them.
DataType promote_types(DataType a, DataType b);
/// The result type of a binary op on a tensor and a Python scalar (torch's
/// rule: the scalar only matters when it is of a higher category).
DataType promote_with_scalar(DataType t, bool scalar_is_float, bool scalar_is_bool);

}  // namespace pypto
