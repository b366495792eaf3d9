// Which variant of the generic tile copies a target's kernels call (see tile_copies.h).
#include "codegen/tile_copies.h"

#include <string>
#include <vector>

namespace pypto::codegen {

// The variants' tables (codegen/tile_ops/copies.cc); only those CMake built (PYPTO_COPIES_<name>)
// are referenced below.
const pypto_tile_copies* tile_copies_generic();
const pypto_tile_copies* tile_copies_sse();
const pypto_tile_copies* tile_copies_avx2();
const pypto_tile_copies* tile_copies_avx512();

namespace {

struct Variant {
  TileLibrary library;
  const char* name;
  const char* level;  ///< the CPU target whose flags the variant is compiled with ("" for generic)
  const pypto_tile_copies* (*copies)();
};

/// The variants of this build, in increasing ISA order.
const std::vector<Variant>& variants() {
  static const std::vector<Variant> v = {
#ifdef PYPTO_COPIES_generic
      {TileLibrary::Generic, "generic", "", &tile_copies_generic},
#endif
#ifdef PYPTO_COPIES_sse
      {TileLibrary::Sse, "sse", "x86-64-v2", &tile_copies_sse},
#endif
#ifdef PYPTO_COPIES_avx2
      {TileLibrary::Avx2, "avx2", "x86-64-v3", &tile_copies_avx2},
#endif
#ifdef PYPTO_COPIES_avx512
      {TileLibrary::Avx512, "avx512", "x86-64-v4", &tile_copies_avx512},
#endif
  };
  return v;
}

}  // namespace

const pypto_tile_copies* tile_copies_for(const Target& target) {
  static const std::string host_arch = target_by_name("generic").arch;
  if (target.arch != host_arch) return nullptr;
  const Variant* best = nullptr;
  for (const Variant& v : variants()) {
    if (v.library > target.library) break;
    if (target.name == "native") {
      // Any variant whose whole ISA level this CPU has (its code runs here); the highest wins.
      if (*v.level == 0 || missing_on_host(target_by_name(v.level)).empty()) best = &v;
    } else if (v.library == target.library) {
      // A named target's own variant, compiled with the same ISA flags.
      best = &v;
    }
  }
  return best ? best->copies() : nullptr;
}

std::vector<std::string> tile_copies_variants() {
  std::vector<std::string> names;
  for (const Variant& v : variants()) names.push_back(v.name);
  return names;
}

}  // namespace pypto::codegen
