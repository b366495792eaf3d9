// The toolchain's precompiled prelude as the install step builds it (precompile_prelude).
#include "codegen/toolchain.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "codegen/cpp_emitter.h"
#include "ir/errors.h"
#include "ir/target.h"

namespace pypto::codegen {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

/// A fresh directory under the system's temporary folder, removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string templ = (fs::temp_directory_path() / "pypto-toolchain-test-XXXXXX").string();
    path = ::mkdtemp(templ.data());
  }
  ~TempDir() { fs::remove_all(path); }
};

/// Sets CXX for the scope of the test and restores it.
struct ScopedCxx {
  std::string saved;
  bool had;
  explicit ScopedCxx(const char* value) {
    const char* old = std::getenv("CXX");
    had = old != nullptr;
    if (had) saved = old;
    ::setenv("CXX", value, 1);
  }
  ~ScopedCxx() {
    if (had)
      ::setenv("CXX", saved.c_str(), 1);
    else
      ::unsetenv("CXX");
  }
};

TEST(ToolchainTest, PrecompilePreludeWritesTheTargetsPreludeAndItsPrecompiledForm) {
  TempDir dir;
  const Target target = target_by_name("native");
  const std::string header = precompile_prelude((dir.path / "pch").string(), target);
  EXPECT_EQ(fs::path(header).parent_path(), dir.path / "pch");
  EXPECT_EQ(fs::path(header).filename().string().rfind("prelude_", 0), 0u) << header;
  EXPECT_EQ(ReadAll(header), emit_prelude(target));
  ASSERT_TRUE(fs::exists(header + ".gch"));
  EXPECT_GT(fs::file_size(header + ".gch"), 0u);
  // Another target's prelude or flags differ: another file, beside the first.
  const std::string v3 = precompile_prelude((dir.path / "pch").string(), target_by_name("x86-64-v3"));
  EXPECT_NE(v3, header);
  EXPECT_EQ(ReadAll(v3), emit_prelude(target_by_name("x86-64-v3")));
  // Only the finished files are left: no temporary file or compiler log.
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir.path / "pch")) {
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
    ++files;
  }
  EXPECT_EQ(files, 4u);
}

TEST(ToolchainTest, AFailingPrecompileNamesTheTargetAndTheCompilerAndLeavesNothing) {
  TempDir dir;
  ScopedCxx cxx("false");
  try {
    precompile_prelude(dir.path.string(), target_by_name("native"));
    FAIL() << "expected a CompileError";
  } catch (const CompileError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("precompiling the prelude of target 'native' with 'false' failed (exit 1)"), std::string::npos)
        << what;
  }
  EXPECT_TRUE(fs::is_empty(dir.path));
}

}  // namespace
}  // namespace pypto::codegen
