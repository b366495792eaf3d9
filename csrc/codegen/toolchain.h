/// The host compiler and the on-disk kernel cache.
#pragma once

#include <string>
#include <vector>

#include "ir/target.h"
#include "runtime/pypto_abi.h"

namespace pypto::codegen {

/// A built (or found) shared library of generated code.
struct BuildResult {
  std::string key;          ///< cache key (hex SHA-256)
  std::string library;      ///< path of the .so
  std::string source_path;  ///< path of the kept generated source
  std::string cache;        ///< "disk" (found) or "compiled"
  double compile_seconds = 0.0;  ///< time in the host compiler (0 on a hit)
  void* handle = nullptr;   ///< dlopen handle, never closed
};

/// The compiler argument vector: `$CXX` (split on spaces) or the first of
/// c++, g++, clang++ on PATH; throws CompileError if none is found.
std::vector<std::string> compiler_command();
/// Flags that compile generated code for `target` (before -o and the source): the source alone
/// then builds a library that needs nothing of pypto's but its runtime API.
std::vector<std::string> compiler_flags(const Target& target);
/// The flags pypto itself compiles generated code with: compiler_flags, and
/// -DPTO_OUT_OF_LINE_COPIES when `copies` (the target's out-of-line tile copies,
/// tile_copies_for) is not null, which the loader then binds.
std::vector<std::string> jit_flags(const Target& target, const pypto_tile_copies* copies);
/// Cache directory: `$PYPTO_CACHE_DIR`, else ~/.cache/pypto.
std::string cache_dir();
/// Builds `source` into a shared library, or loads it from the disk cache.
/// The key covers the source, the full command line, the compiler's identity
/// (path, size, mtime: no process is started on a hit), the CPU's features
/// and the pypto version. Entries are written under temporary names and
/// renamed; a damaged entry is rebuilt. `kernel` names the program in errors.
/// `source` is self-contained. When it starts (after its first line) with `prelude` and that
/// prelude is precompiled (once per prelude, flags and compiler, in the cache's `pch/` folder, or
/// by precompile_prelude in the `pch/` folder beside the installed extension module), the
/// compiler is given it as that header; otherwise the whole source, while the precompile runs on a
/// background thread. The cache key is the same either way.
BuildResult build_library(const std::string& source, const std::string& kernel, const Target& target,
                          const std::string& prelude = "");
/// Precompiles the prelude of `target`'s generated code into `dir`, under the name build_library
/// looks for, now (the package's install step runs this for the native target into the installed
/// `pch/` folder, so the first kernel compiled after installing needs no full parse); returns the
/// header's path. Throws CompileError when the compiler fails.
std::string precompile_prelude(const std::string& dir, const Target& target);
/// Looks up a symbol of a loaded library; throws CompileError if absent.
void* library_symbol(void* handle, const char* name, const std::string& library);

}  // namespace pypto::codegen
