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
    case Opcode::TRESHAPE: return "treshape";
  }
  throw InternalError("unknown Opcode");
}

int opcode_num_srcs(Opcode op) {
  switch (op) {
    case Opcode::TLOAD:
    case Opcode::TFILL: return 0;
    case Opcode::TSTORE:
    case Opcode::TEXP:
    case Opcode::TROWSUM:
    case Opcode::TROWMAX:
    case Opcode::TCOLSUM:
    case Opcode::TCOLMAX:
    case Opcode::TEXPAND:
    case Opcode::TRESHAPE: return 1;
    default: return 2;
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
