/// The op table (ir/ops.def) as C++: the PTO opcode enum, the tensor op enum
/// and the facts every stage reads about each. Nothing else in the compiler
/// lists ops; passes, verifier, printer, parser, emitter, bindings and the
/// Python op functions all look them up here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace pypto {

/// PTO tile instructions (one per PTO_OPCODE row, in table order).
enum class Opcode {
#define PTO_OPCODE(ENUM, mnemonic, form, functor, base, identity, doc) ENUM,
#include "ir/ops.def"
};

/// How an instruction reads and writes tiles.
enum class OpForm {
  Load,        ///< tile <- memref box
  Store,       ///< memref box <- tile
  Fill,        ///< tile <- constant
  Arange,      ///< tile <- start + i * step
  Random,      ///< tile <- Philox draws for elements offset + i
  Unary,       ///< dst[i] = f(src[i])
  Binary,      ///< dst[i] = f(a[i], b[i]) (one may be the instruction's constant)
  Select,      ///< dst[i] = cond[i] ? a[i] : b[i]
  Cast,        ///< dst (its type) <- src
  RowReduce,   ///< reduce the last tile axis
  ColReduce,   ///< reduce the first tile axis
  AxisReduce,  ///< reduce tile axis `axis`
  RowExpand,   ///< dst[r, c] = f(a[r, c], b[r])
  ColExpand,   ///< dst[r, c] = f(a[r, c], b[c])
  Expand,      ///< general broadcast copy
  Reshape,     ///< same elements, another tile shape
  Gather,      ///< indexed load
  Scatter,     ///< indexed store
  Matmul,      ///< dst = a @ b
  MatmulAcc,   ///< dst += a @ b
  Scan,        ///< dst = carry (+) the inclusive scan of src along tile axis `axis`
  Sort,        ///< dst (i32) = the positions of the first K of each row of src in sorted order
};

/// The start value of a reduction combining with a binary opcode.
enum class Identity { None, Zero, One, Lowest, Highest };

/// Static facts about one opcode (a PTO_OPCODE row).
struct OpcodeInfo {
  Opcode op;
  const char* name;     ///< mnemonic in .pto text, e.g. "trowmax"
  OpForm form;
  const char* functor;  ///< tile_ops.h functor, e.g. "OpMax"; "" when none
  Opcode base;          ///< reductions and expands: the binary opcode applied; else `op`
  Identity identity;    ///< binary opcodes combining reductions: the start value
  const char* doc;
};

/// Every opcode, in enum order.
const std::vector<OpcodeInfo>& opcode_table();
const OpcodeInfo& opcode_info(Opcode op);
/// Lower-case mnemonic used in .pto text, e.g. "trowmax".
const char* opcode_name(Opcode op);
/// The opcode with this mnemonic, if any.
std::optional<Opcode> opcode_by_name(const std::string& name);
/// Number of tile sources the opcode reads.
int opcode_num_srcs(Opcode op);
/// "pto::OpMax" for the per-element functor of `op`; throws InternalError when it has none.
std::string opcode_functor(Opcode op);
/// True for the opcodes whose functor has a fast form over a narrower domain of fp32 values
/// (`fast` and `outside`; the sine, cosine and tangent below 2^17 or 2^28): pass fast_forms.
bool has_fast_form(Opcode op);
/// The opcode of `form` that applies binary opcode `base` (e.g. RowExpand of TADD: TROWEXPANDADD).
std::optional<Opcode> opcode_variant(Opcode base, OpForm form);
/// True for the reduction opcodes (TROW*, TCOL*, TRED*).
bool is_reduction(Opcode op);
/// Row / column broadcast forms (`a[i, j] op r[i, 0]`, `a[i, j] op c[0, j]`).
bool is_row_expand(Opcode op);
bool is_col_expand(Opcode op);
const char* form_name(OpForm f);
const char* identity_name(Identity i);

/// Kinds of tensor ops (one per TENSOR_OP row).
enum class TensorOpKind {
#define TENSOR_OP(Kind, name, cls, result, opcode, emits, method, signature, doc) Kind,
#include "ir/ops.def"
};

/// Broad classes of ops, which decide how an op is tiled.
enum class OpClass { Unary, Binary, Where, Cast, Reduce, Scan, Sort, View, Assemble, Create, Matmul, Gather, Scatter, Attention, Conv };

/// How scatter combines a value with the one already at its position (PyPTO's `reduce=`).
enum class ScatterReduce { None = 0, Add = 1, Multiply = 2 };
/// "add" / "multiply" (the .pto spelling of Multiply is "mul"); UserError for another name.
ScatterReduce scatter_reduce_by_name(const std::string& name);
/// The .pto spelling: "add", "mul" ("" for None).
const char* scatter_reduce_name(ScatterReduce r);

/// A counter-based random draw (TRANDOM): Philox4x32 (`rounds` rounds) keyed by `key`; element i of the
/// stream is lane i % 4 of the block with the 128-bit counter (block0 + i / 4 as the low 64 bits, where
/// block0 is the random op's operand or 0, and `counter` as the high).
struct RandomParams {
  uint64_t key = 0;
  uint64_t counter = 0;
  bool normal = false;  ///< Box-Muller pairs of the stream's fp32 uniforms; else uniform
  /// Uniform: the mantissa bits kept (23 for fp32, 10 for fp16, 7 for bf16): value = bits / 2^mantissa.
  int mantissa = 23;
  /// Philox rounds: 10 (Philox4x32-10), or 7 (PyPTO's uniform_impl(rounds=7)).
  int rounds = 10;
};

/// How an op decides its result dtype.
enum class ResultType {
  Same,   ///< the (promoted) operand type
  Float,  ///< integers and bool become DT_FP32 (exp, sqrt, true division, ...)
  Bool,   ///< comparisons
  Wide,   ///< integers and bool become DT_INT64 (sum, prod)
  Integer,  ///< the (promoted) operand type, which must be an integer or bool (bitwise ops)
  Index,    ///< DT_INT32 positions (argsort)
};

/// Static facts about a tensor op (a TENSOR_OP row).
struct OpInfo {
  TensorOpKind kind;
  const char* name;  ///< user-facing name, e.g. "amax"
  OpClass cls;
  ResultType result;
  /// Elementwise ops: the instruction computing them; reductions: the binary opcode combining
  /// partial results; empty when the lowering is written out op by op.
  std::optional<Opcode> opcode;
  const char* emits;      ///< space-separated mnemonics the lowering emits
  bool method;            ///< pypto.Tensor has a method of this name
  const char* signature;  ///< Python signature with defaults, e.g. "(x, dim=None, keepdim=False)";
                          ///< "" for ops only passes create (no Python function)
  const char* doc;
};

/// An op written in Python as a composition of table ops (a COMPOSITE row).
struct CompositeInfo {
  const char* name;
  const char* expands;  ///< space-separated names of the ops it traces into
  bool method;
  const char* signature;
  const char* doc;
};

const std::vector<OpInfo>& op_table();
const std::vector<CompositeInfo>& composite_table();
/// The facts about `kind`.
const OpInfo& op_info(TensorOpKind kind);
/// Looks an op up by its user-facing name; throws UserError if unknown.
TensorOpKind op_kind_from_name(const std::string& name);
const char* op_class_name(OpClass c);
const char* result_type_name(ResultType r);

}  // namespace pypto
