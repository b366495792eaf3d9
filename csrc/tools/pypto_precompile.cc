// pypto_precompile DIR TARGET...: precompiles the prelude of generated code (the tile library and
// the runtime ABI) for each named CPU target into DIR, under the names the kernel compiler looks
// for. The package's install step runs it for the native target into the installed `pch/` folder,
// so the first kernel a fresh install compiles parses only its own code.
#include <cstdio>
#include <exception>

#include "codegen/toolchain.h"
#include "ir/target.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s DIR TARGET...\n", argv[0]);
    return 2;
  }
  int failed = 0;
  for (int i = 2; i < argc; ++i) {
    try {
      const std::string header = pypto::codegen::precompile_prelude(argv[1], pypto::target_by_name(argv[i]));
      std::printf("pypto_precompile: %s: %s.gch\n", argv[i], header.c_str());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "pypto_precompile: %s: %s\n", argv[i], e.what());
      failed = 1;
    }
  }
  return failed;
}
