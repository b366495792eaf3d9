#include "ir/dtype.h"

#include <fmt/format.h>

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
    case DataType::UINT16: return 2;
    case DataType::UINT32: return 4;
    case DataType::UINT64: return 8;
    case DataType::FP8E4M3:
    case DataType::FP8E5M2:
    case DataType::FP8E8M0:
    case DataType::HF8:
    case DataType::INT4:
    case DataType::FP4_E2M1:
    case DataType::FP4_E1M2:
    case DataType::FP4_E2M1X2:
    case DataType::FP4_E1M2X2: return 1;
    case DataType::HF4:
    case DataType::BOTTOM: check_storage_dtype(dt, "an element"); break;
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
    case DataType::UINT16: return "DT_UINT16";
    case DataType::UINT32: return "DT_UINT32";
    case DataType::UINT64: return "DT_UINT64";
    case DataType::FP8E4M3: return "DT_FP8E4M3";
    case DataType::FP8E5M2: return "DT_FP8E5M2";
    case DataType::FP8E8M0: return "DT_FP8E8M0";
    case DataType::HF8: return "DT_HF8";
    case DataType::INT4: return "DT_INT4";
    case DataType::FP4_E2M1: return "DT_FP4_E2M1";
    case DataType::FP4_E1M2: return "DT_FP4_E1M2";
    case DataType::FP4_E2M1X2: return "DT_FP4_E2M1X2";
    case DataType::FP4_E1M2X2: return "DT_FP4_E1M2X2";
    case DataType::HF4: return "DT_HF4";
    case DataType::BOTTOM: return "DT_BOTTOM";
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
    case DataType::UINT16: return "u16";
    case DataType::UINT32: return "u32";
    case DataType::UINT64: return "u64";
    case DataType::FP8E4M3: return "f8e4m3";
    case DataType::FP8E5M2: return "f8e5m2";
    case DataType::FP8E8M0: return "f8e8m0";
    case DataType::HF8: return "hf8";
    case DataType::INT4: return "i4";
    case DataType::FP4_E2M1: return "f4e2m1";
    case DataType::FP4_E1M2: return "f4e1m2";
    case DataType::FP4_E2M1X2: return "f4e2m1x2";
    case DataType::FP4_E1M2X2: return "f4e1m2x2";
    case DataType::HF4:
    case DataType::BOTTOM: check_storage_dtype(dt, "a .pto type"); break;
  }
  throw InternalError("unknown DataType");
}

std::string dtype_cpp_type(DataType dt) {
  switch (dt) {
    case DataType::FP32: return "float";
    case DataType::FP16: return "pto::f16";
    case DataType::BF16: return "pto::bf16";
    case DataType::DOUBLE: return "double";
    case DataType::INT8: return "int8_t";
    case DataType::INT16: return "int16_t";
    case DataType::INT32: return "int32_t";
    case DataType::INT64: return "int64_t";
    case DataType::UINT8: return "uint8_t";
    case DataType::BOOL: return "bool";
    case DataType::UINT16: return "uint16_t";
    case DataType::UINT32: return "uint32_t";
    case DataType::UINT64: return "uint64_t";
    case DataType::FP8E4M3: return "pto::f8e4m3";
    case DataType::FP8E5M2: return "pto::f8e5m2";
    case DataType::FP8E8M0: return "pto::f8e8m0";
    case DataType::HF8: return "pto::hf8";
    case DataType::INT4: return "pto::i4";
    case DataType::FP4_E2M1: return "pto::f4e2m1";
    case DataType::FP4_E1M2: return "pto::f4e1m2";
    case DataType::FP4_E2M1X2: return "pto::f4e2m1x2";
    case DataType::FP4_E1M2X2: return "pto::f4e1m2x2";
    case DataType::HF4:
    case DataType::BOTTOM: check_storage_dtype(dt, "generated code"); break;
  }
  throw InternalError("unknown DataType");
}

const std::vector<DataType>& all_dtypes() {
  static const std::vector<DataType> all = [] {
    std::vector<DataType> v;
    for (int i = 0; i < static_cast<int>(DataType::BOTTOM); ++i)
      if (static_cast<DataType>(i) != DataType::HF4) v.push_back(static_cast<DataType>(i));
    return v;
  }();
  return all;
}

std::optional<DataType> dtype_by_pto_name(std::string_view name) {
  for (DataType d : all_dtypes())
    if (dtype_pto_name(d) == name) return d;
  return std::nullopt;
}

namespace {
bool is_unsigned(DataType dt) {
  return dt == DataType::UINT8 || dt == DataType::UINT16 || dt == DataType::UINT32 || dt == DataType::UINT64;
}
}  // namespace

bool dtype_is_int(DataType dt) {
  return dt == DataType::INT4 || dt == DataType::INT8 || dt == DataType::INT16 || dt == DataType::INT32 || dt == DataType::INT64 ||
         is_unsigned(dt);
}

DataType compute_dtype(DataType dt) {
  switch (dt) {
    case DataType::FP32:
    case DataType::FP16:
    case DataType::BF16:
    case DataType::FP8E4M3:
    case DataType::FP8E5M2:
    case DataType::FP8E8M0:
    case DataType::HF8:
    case DataType::FP4_E2M1:
    case DataType::FP4_E1M2: return DataType::FP32;
    case DataType::FP4_E2M1X2:
    case DataType::FP4_E1M2X2: return dt;  // moved as it is; the graph builder refuses to compute on it
    case DataType::DOUBLE: return DataType::DOUBLE;
    case DataType::INT64:
    case DataType::UINT32:
    case DataType::UINT64: return DataType::INT64;
    default: return DataType::INT32;
  }
}

namespace {
int category(DataType dt) { return dt == DataType::BOOL ? 0 : dtype_is_int(dt) ? 1 : 2; }
}  // namespace

DataType promote_types(DataType a, DataType b) {
  if (a == b) return a;
  int ca = category(a), cb = category(b);
  if (ca != cb) return ca > cb ? a : b;
  if (ca == 2) {
    if (a == DataType::DOUBLE || b == DataType::DOUBLE) return DataType::DOUBLE;
    return DataType::FP32;  // fp16 with bf16 or fp32, bf16 with fp32, the FP8 formats with any other
  }
  // The wider unsigned types mix with no other integer type (as in torch): no type holds both.
  for (DataType d : {a, b}) {
    if (d == DataType::UINT16 || d == DataType::UINT32 || d == DataType::UINT64) {
      throw TypeError(fmt::format("{} and {} have no common type; cast one operand first", dtype_name(a),
                                  dtype_name(b)));
    }
  }
  // Integers: unsigned uint8 with a signed type needs a wider signed type.
  auto rank = [](DataType d) {
    switch (d) {
      case DataType::INT4: return 0;
      case DataType::INT8: return 1;
      case DataType::UINT8: return 1;
      case DataType::INT16: return 2;
      case DataType::INT32: return 3;
      default: return 4;
    }
  };
  if (a == DataType::UINT8 || b == DataType::UINT8) {
    DataType other = a == DataType::UINT8 ? b : a;
    if (other == DataType::INT8 || other == DataType::INT4) return DataType::INT16;
    return other;
  }
  return rank(a) >= rank(b) ? a : b;
}

DataType promote_with_scalar(DataType t, bool scalar_is_float, bool scalar_is_bool) {
  int cs = scalar_is_float ? 2 : scalar_is_bool ? 0 : 1;
  if (cs <= category(t)) return t;
  return cs == 2 ? DataType::FP32 : DataType::INT64;
}

bool dtype_is_float(DataType dt) {
  return dt == DataType::FP32 || dt == DataType::FP16 || dt == DataType::BF16 || dt == DataType::DOUBLE ||
         dt == DataType::FP8E4M3 || dt == DataType::FP8E5M2 || dt == DataType::FP8E8M0 || dt == DataType::HF8 || dt == DataType::FP4_E2M1 || dt == DataType::FP4_E1M2 ||
         dt == DataType::FP4_E2M1X2 || dt == DataType::FP4_E1M2X2;
}

bool packed_dtype(DataType dt) {
  return dt == DataType::INT4 || dt == DataType::FP4_E2M1 || dt == DataType::FP4_E1M2;
}

bool pair_dtype(DataType dt) { return dt == DataType::FP4_E2M1X2 || dt == DataType::FP4_E1M2X2; }

DataType pair_element(DataType dt) { return dt == DataType::FP4_E2M1X2 ? DataType::FP4_E2M1 : DataType::FP4_E1M2; }

void check_storage_dtype(DataType dt, std::string_view what) {
  if (dt == DataType::BOTTOM) {
    throw UserError(fmt::format("{}: DT_BOTTOM is PyPTO's placeholder for 'no dtype'; a tensor cannot have it", what));
  }
  if (dt == DataType::HF4) {
    throw NotSupportedError(fmt::format("{}: DT_HF4 (HiFloat4) has no element encoding defined by PyPTO; a tensor of "
                                        "it is not supported yet",
                                        what));
  }
}

}  // namespace pypto
