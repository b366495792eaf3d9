#include "ir/op_table.h"

#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <string>

#include "ir/errors.h"

namespace pypto {
namespace {

TEST(OpTable, OpcodeRowsAreInEnumOrderAndFoundByMnemonic) {
  const auto& t = opcode_table();
  std::set<std::string> names;
  for (size_t i = 0; i < t.size(); ++i) {
    EXPECT_EQ(static_cast<size_t>(t[i].op), i);
    EXPECT_TRUE(names.insert(t[i].name).second) << t[i].name << " is listed twice";
    auto back = opcode_by_name(t[i].name);
    ASSERT_TRUE(back.has_value()) << t[i].name;
    EXPECT_EQ(*back, t[i].op);
  }
  EXPECT_FALSE(opcode_by_name("tnosuchop").has_value());
}

TEST(OpTable, ReductionsAndExpandsApplyABinaryOpcode) {
  for (const OpcodeInfo& r : opcode_table()) {
    if (!is_reduction(r.op) && r.form != OpForm::RowExpand && r.form != OpForm::ColExpand) continue;
    EXPECT_EQ(opcode_info(r.base).form, OpForm::Binary) << r.name;
    EXPECT_EQ(opcode_functor(r.op), opcode_functor(r.base)) << r.name;
    EXPECT_EQ(opcode_variant(r.base, r.form), r.op) << r.name;
  }
  EXPECT_EQ(opcode_variant(Opcode::TADD, OpForm::RowExpand), Opcode::TROWEXPANDADD);
  EXPECT_EQ(opcode_variant(Opcode::TMUL, OpForm::AxisReduce), Opcode::TREDPROD);
  EXPECT_FALSE(opcode_variant(Opcode::TPOW, OpForm::RowExpand).has_value());
}

TEST(OpTable, EveryReductionHasAStartValue) {
  for (const OpInfo& op : op_table()) {
    if (op.cls != OpClass::Reduce) continue;
    ASSERT_TRUE(op.opcode.has_value()) << op.name;
    EXPECT_NE(opcode_info(*op.opcode).identity, Identity::None) << op.name;
    for (OpForm f : {OpForm::RowReduce, OpForm::ColReduce, OpForm::AxisReduce})
      EXPECT_TRUE(opcode_variant(*op.opcode, f).has_value()) << op.name << " " << form_name(f);
  }
}

TEST(OpTable, TensorOpsNameTheOpcodesTheyEmit) {
  for (const OpInfo& op : op_table()) {
    EXPECT_EQ(&op_info(op.kind), &op);
    std::istringstream emits(op.emits);
    std::set<std::string> listed;
    for (std::string m; emits >> m;) {
      EXPECT_TRUE(opcode_by_name(m).has_value()) << op.name << " emits unknown " << m;
      listed.insert(m);
    }
    if (op.opcode) EXPECT_TRUE(listed.count(opcode_name(*op.opcode))) << op.name;
    EXPECT_EQ(op_kind_from_name(op.name), op.kind);
  }
  EXPECT_THROW(op_kind_from_name("nosuchop"), UserError);
}

TEST(OpTable, ArityFollowsTheForm) {
  EXPECT_EQ(opcode_num_srcs(Opcode::TLOAD), 0);
  EXPECT_EQ(opcode_num_srcs(Opcode::TSIGN), 1);
  EXPECT_EQ(opcode_num_srcs(Opcode::TCMPGT), 2);
  EXPECT_EQ(opcode_num_srcs(Opcode::TSCATTER), 2);
  EXPECT_EQ(opcode_num_srcs(Opcode::TSELECT), 3);
  EXPECT_EQ(opcode_num_srcs(Opcode::TMATMUL_ACC), 3);
  EXPECT_THROW(opcode_functor(Opcode::TLOAD), InternalError);
  EXPECT_EQ(opcode_functor(Opcode::TROWMAX), "pto::OpMax");
}

}  // namespace
}  // namespace pypto
