#include "ir/program.h"

#include "ir/errors.h"

#include <fmt/format.h>

namespace pypto {

const char* opcode_name(Opcode op) {
  switch (op) {
    case Opcode::TLOAD: return "tload";
    case Opcode::TSTORE: return "tstore";
    case Opcode::TFILL: return "tfill";
    case Opcode::TADD: return "tadd";
    case Opcode::TSUB: return "tsub";
    case Opcode::TMUL: return "tmul";
    case Opcode::TDIV: return "tdiv";
    case Opcode::TMAX: return "tmax";
    case Opcode::TEXP: return "texp";
    case Opcode::TROWSUM: return "trowsum";
    case Opcode::TROWMAX: return "trowmax";
    case Opcode::TCOLSUM: return "tcolsum";
    case Opcode::TCOLMAX: return "tcolmax";
    case Opcode::TROWEXPANDADD: return "trowexpandadd";
    case Opcode::TROWEXPANDSUB: return "trowexpandsub";
    case Opcode::TROWEXPANDMUL: return "trowexpandmul";
    case Opcode::TROWEXPANDDIV: return "trowexpanddiv";
    case Opcode::TROWEXPANDMAX: return "trowexpandmax";
    case Opcode::TCOLEXPANDADD: return "tcolexpandadd";
    case Opcode::TCOLEXPANDSUB: return "tcolexpandsub";
    case Opcode::TCOLEXPANDMUL: return "tcolexpandmul";
    case Opcode::TCOLEXPANDDIV: return "tcolexpanddiv";
    case Opcode::TCOLEXPANDMAX: return "tcolexpandmax";
    case Opcode::TEXPAND: return "texpand";
    case Opcode::TARANGE: return "tarange";
    case Opcode::TGATHER: return "tgather";
    case Opcode::TSCATTER: return "tscatter";
    case Opcode::TMATMUL: return "tmatmul";
    case Opcode::TMATMUL_ACC: return "tmatmul_acc";
    case Opcode::TRESHAPE: return "treshape";
    case Opcode::TNEG: return "tneg";
    case Opcode::TABS: return "tabs";
    case Opcode::TLOG: return "tlog";
    case Opcode::TSQRT: return "tsqrt";
    case Opcode::TRSQRT: return "trsqrt";
    case Opcode::TRECIP: return "trecip";
    case Opcode::TRELU: return "trelu";
    case Opcode::TSIGMOID: return "tsigmoid";
    case Opcode::TTANH: return "ttanh";
    case Opcode::TSILU: return "tsilu";
    case Opcode::TGELU: return "tgelu";
    case Opcode::TERF: return "terf";
    case Opcode::TERFC: return "terfc";
    case Opcode::TFLOOR: return "tfloor";
    case Opcode::TCEIL: return "tceil";
    case Opcode::TROUND: return "tround";
    case Opcode::TTRUNC: return "ttrunc";
    case Opcode::TEXP2: return "texp2";
    case Opcode::TEXPM1: return "texpm1";
    case Opcode::TNOT: return "tnot";
    case Opcode::TMIN: return "tmin";
    case Opcode::TPOW: return "tpow";
    case Opcode::TCMPGT: return "tcmpgt";
    case Opcode::TCMPGE: return "tcmpge";
    case Opcode::TCMPLT: return "tcmplt";
    case Opcode::TCMPLE: return "tcmple";
    case Opcode::TCMPEQ: return "tcmpeq";
    case Opcode::TCMPNE: return "tcmpne";
    case Opcode::TSELECT: return "tselect";
    case Opcode::TCAST: return "tcast";
    case Opcode::TROWMIN: return "trowmin";
    case Opcode::TROWPROD: return "trowprod";
    case Opcode::TCOLMIN: return "tcolmin";
    case Opcode::TCOLPROD: return "tcolprod";
    case Opcode::TREDSUM: return "tredsum";
    case Opcode::TREDMAX: return "tredmax";
    case Opcode::TREDMIN: return "tredmin";
    case Opcode::TREDPROD: return "tredprod";
  }
  throw InternalError("unknown Opcode");
}

int opcode_num_srcs(Opcode op) {
  switch (op) {
    case Opcode::TLOAD:
    case Opcode::TFILL:
    case Opcode::TARANGE: return 0;
    case Opcode::TSTORE:
    case Opcode::TEXP:
    case Opcode::TROWSUM:
    case Opcode::TROWMAX:
    case Opcode::TCOLSUM:
    case Opcode::TCOLMAX:
    case Opcode::TEXPAND:
    case Opcode::TRESHAPE:
    case Opcode::TNEG: case Opcode::TABS: case Opcode::TLOG: case Opcode::TSQRT: case Opcode::TRSQRT:
    case Opcode::TRECIP: case Opcode::TRELU: case Opcode::TSIGMOID: case Opcode::TTANH: case Opcode::TSILU:
    case Opcode::TGELU: case Opcode::TERF: case Opcode::TERFC: case Opcode::TFLOOR: case Opcode::TCEIL:
    case Opcode::TROUND: case Opcode::TTRUNC: case Opcode::TEXP2: case Opcode::TEXPM1: case Opcode::TNOT:
    case Opcode::TCAST:
    case Opcode::TROWMIN: case Opcode::TROWPROD: case Opcode::TCOLMIN: case Opcode::TCOLPROD:
    case Opcode::TREDSUM: case Opcode::TREDMAX: case Opcode::TREDMIN: case Opcode::TREDPROD: return 1;
    case Opcode::TSELECT: return 3;
    case Opcode::TGATHER: return 1;
    case Opcode::TSCATTER: return 2;
    case Opcode::TMATMUL_ACC: return 3;
    default: return 2;
  }
}

int instr_num_srcs(const Instr& in) { return opcode_num_srcs(in.op) - (in.scalar_pos >= 0 ? 1 : 0); }

bool reads_memory(Opcode op) { return op == Opcode::TLOAD || op == Opcode::TGATHER; }
bool writes_memory(Opcode op) { return op == Opcode::TSTORE || op == Opcode::TSCATTER; }
int memory_tile(const Instr& in) { return reads_memory(in.op) ? in.dst : in.srcs.at(0); }

bool is_reduction(Opcode op) {
  switch (op) {
    case Opcode::TROWSUM: case Opcode::TROWMAX: case Opcode::TCOLSUM: case Opcode::TCOLMAX:
    case Opcode::TROWMIN: case Opcode::TROWPROD: case Opcode::TCOLMIN: case Opcode::TCOLPROD:
    case Opcode::TREDSUM: case Opcode::TREDMAX: case Opcode::TREDMIN: case Opcode::TREDPROD: return true;
    default: return false;
  }
}

namespace {
int64_t round64(int64_t b) { return (b + 63) / 64 * 64; }
}  // namespace

int64_t tile_bytes(const TileDecl& t) {
  int64_t n = dtype_size(t.dtype);
  for (int64_t d : t.shape) n *= d;
  return round64(n);
}

bool local_is_dynamic(const MemRef& m) {
  for (const Expr& d : m.shape)
    if (!d.is_const()) return true;
  return false;
}

int64_t local_bytes(const MemRef& m) {
  int64_t n = dtype_size(m.dtype);
  for (const Expr& d : m.shape) {
    auto c = d.as_const();
    if (!c) throw NotSupportedError(fmt::format("local buffer %{} has a dynamic shape; not supported yet", m.name));
    n *= *c;
  }
  return round64(n);
}

}  // namespace pypto

namespace pypto {

PtoSyntaxError::PtoSyntaxError(int line, int column, const std::string& msg)
    : Error(fmt::format("line {}, column {}: {}", line, column, msg)), line_(line), column_(column) {}

}  // namespace pypto
