#include "ir/dtype.h"

#include "ir/errors.h"

namespace pypto {

int dtype_size(DataType dt) {
  switch (dt) {
    case DataType::FP32: return 4;
    case DataType::FP16: return 2;
    case DataType::BF16: return 2;
    case DataType::DOUBLE: return 8;
    case DataType::INT8: return 1;
    case DataType::INT16: return 2;
    case DataType::INT32: return 4;
    case DataType::INT64: return 8;
    case DataType::UINT8: return 1;
    case DataType::BOOL: return 1;
  }
  throw InternalError("unknown DataType");
}

std::string dtype_name(DataType dt) {
  switch (dt) {
    case DataType::FP32: return "DT_FP32";
    case DataType::FP16: return "DT_FP16";
    case DataType::BF16: return "DT_BF16";
    case DataType::DOUBLE: return "DT_DOUBLE";
    case DataType::INT8: return "DT_INT8";
    case DataType::INT16: return "DT_INT16";
    case DataType::INT32: return "DT_INT32";
    case DataType::INT64: return "DT_INT64";
    case DataType::UINT8: return "DT_UINT8";
    case DataType::BOOL: return "DT_BOOL";
  }
  throw InternalError("unknown DataType");
}

std::string dtype_pto_name(DataType dt) {
  switch (dt) {
    case DataType::FP32: return "f32";
    case DataType::FP16: return "f16";
    case DataType::BF16: return "bf16";
    case DataType::DOUBLE: return "f64";
    case DataType::INT8: return "i8";
    case DataType::INT16: return "i16";
    case DataType::INT32: return "i32";
    case DataType::INT64: return "i64";
    case DataType::UINT8: return "u8";
    case DataType::BOOL: return "i1";
  }
  throw InternalError("unknown DataType");
}

std::string dtype_cpp_type(DataType dt) {
  switch (dt) {
    case DataType::FP32: return "float";
    case DataType::FP16: return "uint16_t";
    case DataType::BF16: return "uint16_t";
    case DataType::DOUBLE: return "double";
    case DataType::INT8: return "int8_t";
    case DataType::INT16: return "int16_t";
    case DataType::INT32: return "int32_t";
    case DataType::INT64: return "int64_t";
    case DataType::UINT8: return "uint8_t";
    case DataType::BOOL: return "uint8_t";
  }
  throw InternalError("unknown DataType");
}

bool dtype_is_float(DataType dt) {
  return dt == DataType::FP32 || dt == DataType::FP16 || dt == DataType::BF16 || dt == DataType::DOUBLE;
}

}  // namespace pypto
