// The machine generated code is compiled for: its ISA, vector width, caches, compiler flags and the
// tile-library variant. Passes and the emitter read these facts from a Target; none tests the
// compiler's ISA macros of its own. A GPU backend would be another kind of Target.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace pypto {

/// Tile-library variants, in increasing ISA order (the generated source defines PTO_ISA to one).
enum class TileLibrary { Generic = 1, Sse = 2, Avx2 = 3, Avx512 = 4 };

struct Target {
  std::string name;                   ///< native, x86-64-v2, x86-64-v3, x86-64-v4 or generic
  std::string arch;                   ///< x86_64 or aarch64 (the architecture the code is for)
  std::vector<std::string> features;  ///< CPU features the code may use (/proc/cpuinfo names)
  int vector_bytes = 16;              ///< the widest SIMD register the code uses
  int64_t l1d_bytes = 32 << 10;       ///< data caches (this machine's: tuning only)
  int64_t l2_bytes = 1 << 20;
  int64_t l3_bytes = 32 << 20;
  std::vector<std::string> flags;     ///< host-compiler flags that select the ISA
  TileLibrary library = TileLibrary::Generic;

  bool has(const std::string& feature) const;
  /// Whether the tile library's int8 matmul uses dot-product instructions (AVX512-VNNI's VPDPBUSD).
  bool int8_dot_products() const;
  /// How the tile library multiplies bf16 operands into an fp32 product: "amx" (AMX-BF16 tile
  /// dot products, falling back to the next at run time where the OS refuses AMX state), "avx512"
  /// (AVX512-BF16's VDPBF16PS) or "" (none: the operands are widened to fp32 tiles as they load).
  std::string bf16_dot_products() const;
  /// Columns of the float matmul micro-kernel's register block: two vectors of floats (the tile
  /// library's PTO_MATMUL_VECS), the width of the column panels its b operand is loaded in.
  int64_t matmul_panel_cols() const { return 2 * vector_bytes / 4; }
  /// "avx512", "avx2", "sse" or "generic".
  std::string library_name() const;
  /// One line: name, ISA, vector width, library, caches, flags (for dumps and stats).
  std::string describe() const;
};

/// The names `target_by_name` accepts, "native" first.
const std::vector<std::string>& target_names();

/// The target of a name; "" means native. An unknown name raises UserError listing the names.
Target target_by_name(const std::string& name);

/// The features (of `t.features`) this CPU lacks, or code of another architecture: empty when
/// code built for `t` runs here.
std::vector<std::string> missing_on_host(const Target& t);

/// The features this CPU reports (for tests: `set_host_features_for_testing` replaces them).
const std::vector<std::string>& host_features();
void set_host_features_for_testing(const std::vector<std::string>* features);
/// Changes each time `set_host_features_for_testing` is called: a cached `missing_on_host` answer
/// holds while it stays the same.
uint64_t host_features_generation();

}  // namespace pypto
