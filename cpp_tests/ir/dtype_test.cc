#include "ir/dtype.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

#include "ir/errors.h"

namespace pypto {
namespace {

TEST(DType, EveryTypeHasDistinctNamesThatRoundTrip) {
  std::set<std::string> names, pto_names;
  for (DataType d : all_dtypes()) {
    EXPECT_TRUE(names.insert(dtype_name(d)).second) << dtype_name(d);
    EXPECT_TRUE(pto_names.insert(dtype_pto_name(d)).second) << dtype_pto_name(d);
    ASSERT_TRUE(dtype_by_pto_name(dtype_pto_name(d)).has_value());
    EXPECT_EQ(*dtype_by_pto_name(dtype_pto_name(d)), d);
    EXPECT_FALSE(dtype_cpp_type(d).empty());
  }
  EXPECT_EQ(all_dtypes().size(), 22u);  // every type but the placeholder BOTTOM and HF4, which has no encoding
  EXPECT_FALSE(dtype_by_pto_name("f7").has_value());
}

TEST(DType, NarrowTypesComputeInAWiderOne) {
  for (DataType d : {DataType::FP8E4M3, DataType::FP8E5M2, DataType::FP8E8M0, DataType::HF8}) {
    EXPECT_EQ(dtype_size(d), 1);
    EXPECT_TRUE(dtype_is_float(d));
    EXPECT_EQ(compute_dtype(d), DataType::FP32);
  }
  EXPECT_EQ(compute_dtype(DataType::UINT16), DataType::INT32);
  EXPECT_EQ(compute_dtype(DataType::UINT32), DataType::INT64);
  EXPECT_EQ(compute_dtype(DataType::UINT64), DataType::INT64);
  EXPECT_TRUE(dtype_is_int(DataType::UINT64));
  EXPECT_EQ(dtype_size(DataType::UINT64), 8);
}

TEST(DType, ThePlaceholderTypeHasNoStorage) {
  EXPECT_EQ(dtype_name(DataType::BOTTOM), "DT_BOTTOM");
  try {
    dtype_size(DataType::BOTTOM);
    FAIL() << "expected a UserError";
  } catch (const UserError& e) {
    EXPECT_STREQ(e.what(), "an element: DT_BOTTOM is PyPTO's placeholder for 'no dtype'; a tensor cannot have it");
  }
  EXPECT_THROW(dtype_cpp_type(DataType::BOTTOM), UserError);
  EXPECT_THROW(check_storage_dtype(DataType::BOTTOM, "x"), UserError);
  check_storage_dtype(DataType::HF8, "x");
}

TEST(DType, PromotionOfTheWideUnsignedTypes) {
  EXPECT_EQ(promote_types(DataType::UINT32, DataType::UINT32), DataType::UINT32);
  EXPECT_EQ(promote_types(DataType::UINT16, DataType::FP16), DataType::FP16);  // a float wins
  EXPECT_EQ(promote_types(DataType::FP8E4M3, DataType::BF16), DataType::FP32);
  EXPECT_EQ(promote_types(DataType::UINT8, DataType::INT8), DataType::INT16);
  try {
    promote_types(DataType::UINT32, DataType::INT32);
    FAIL() << "expected a TypeError";
  } catch (const TypeError& e) {
    EXPECT_STREQ(e.what(), "DT_UINT32 and DT_INT32 have no common type; cast one operand first");
  }
  EXPECT_THROW(promote_types(DataType::INT64, DataType::UINT64), TypeError);
}

}  // namespace
}  // namespace pypto
