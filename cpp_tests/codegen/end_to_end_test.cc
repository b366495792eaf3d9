// Compiles Tensor Graphs with the host compiler and runs the generated
// orchestration on the task runtime, checking numbers against a reference
// computed here. This is the one C++ test that exercises every stage at once.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "codegen/program.h"
#include "ir/errors.h"
#include "runtime/runtime.h"
#include "../test_graphs.h"

namespace pypto {
namespace {

using codegen::CompiledProgram;

// Sets an environment variable for the lifetime of the object and restores it after,
// so a failing assertion cannot leak CXX into later tests.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) ::setenv(name_, old_->c_str(), 1);
    else ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

std::string MakeTempDir() {
  char tmpl[] = "/tmp/pypto_cpp_tests_XXXXXX";
  const char* dir = ::mkdtemp(tmpl);
  if (!dir) throw std::runtime_error("mkdtemp failed");
  return dir;
}

pypto_tensor Describe(std::vector<float>& data, const std::vector<int64_t>& shape) {
  pypto_tensor t{};
  t.data = data.data();
  t.ndim = static_cast<int32_t>(shape.size());
  t.elem_size = sizeof(float);
  int64_t stride = 1;
  for (size_t d = shape.size(); d-- > 0;) {
    t.shape[d] = shape[d];
    t.stride[d] = stride;
    stride *= shape[d];
  }
  return t;
}

// Runs the program's orchestration the way the Python binding does.
int64_t RunProgram(const CompiledProgram& p, std::vector<pypto_tensor> tensors, const std::vector<int64_t>& scalars = {}) {
  static runtime::Runtime rt(4);
  int32_t rc = -1;
  runtime::RunStats st = rt.run([&](const pypto_runtime_api* api) {
    rc = p.entry(api, tensors.data(), static_cast<int32_t>(tensors.size()), scalars.data(),
                 static_cast<int32_t>(scalars.size()));
  });
  EXPECT_EQ(rc, 0);
  return st.tasks;
}

std::vector<float> RandomMatrix(int64_t rows, int64_t cols, unsigned seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-4.0f, 4.0f);
  std::vector<float> v(rows * cols);
  for (float& x : v) x = dist(gen);
  return v;
}

std::vector<float> ReferenceSoftmax(const std::vector<float>& x, int64_t rows, int64_t cols) {
  std::vector<float> y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = &x[r * cols];
    double m = *std::max_element(row, row + cols);
    double s = 0;
    for (int64_t c = 0; c < cols; ++c) s += std::exp(row[c] - m);
    for (int64_t c = 0; c < cols; ++c) y[r * cols + c] = static_cast<float>(std::exp(row[c] - m) / s);
  }
  return y;
}

void ExpectClose(const std::vector<float>& got, const std::vector<float>& want, int64_t cols) {
  ASSERT_EQ(got.size(), want.size());
  int reported = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    float tol = 1e-6f + 1e-4f * std::fabs(want[i]);
    if (!(std::fabs(got[i] - want[i]) <= tol) && reported++ < 5)
      ADD_FAILURE() << "element (" << i / cols << ", " << i % cols << "): got " << got[i] << ", want " << want[i];
  }
}

class EndToEndTest : public ::testing::Test {
 protected:
  // One fresh cache per run: earlier runs' libraries must not hide a codegen change.
  static void SetUpTestSuite() { cache_dir_ = new std::string(MakeTempDir()); }
  static void TearDownTestSuite() {
    std::error_code ec;
    std::filesystem::remove_all(*cache_dir_, ec);
    delete cache_dir_;
    cache_dir_ = nullptr;
  }
  void SetUp() override { env_ = std::make_unique<ScopedEnv>("PYPTO_CACHE_DIR", *cache_dir_); }
  void TearDown() override { env_.reset(); }

  static std::string* cache_dir_;
  std::unique_ptr<ScopedEnv> env_;
};
std::string* EndToEndTest::cache_dir_ = nullptr;

struct SoftmaxCase {
  int64_t rows, cols;
  int64_t tasks;  // row blocks of the fused grid
};

class SoftmaxEndToEndTest : public EndToEndTest, public ::testing::WithParamInterface<SoftmaxCase> {};

TEST_P(SoftmaxEndToEndTest, MatchesReference) {
  const SoftmaxCase& c = GetParam();
  auto p = codegen::compile_program(testing::SoftmaxGraph(c.rows, c.cols), PassOptions{});
  ASSERT_NE(p->entry, nullptr);
  EXPECT_EQ(p->incore_functions(), 1);
  EXPECT_EQ(p->count_tasks({}), c.tasks);
  EXPECT_EQ(p->output_shapes({}), (std::vector<std::vector<int64_t>>{{c.rows, c.cols}}));

  std::vector<float> x = RandomMatrix(c.rows, c.cols, static_cast<unsigned>(c.rows * 7919 + c.cols));
  // NaN marks elements the program failed to write.
  std::vector<float> y(x.size(), std::nanf(""));
  int64_t tasks = RunProgram(*p, {Describe(x, {c.rows, c.cols}), Describe(y, {c.rows, c.cols})});
  EXPECT_EQ(tasks, c.tasks);
  ExpectClose(y, ReferenceSoftmax(x, c.rows, c.cols), c.cols);
}

INSTANTIATE_TEST_SUITE_P(Shapes, SoftmaxEndToEndTest,
                         ::testing::Values(SoftmaxCase{64, 1024, 2}, SoftmaxCase{50, 100, 2}, SoftmaxCase{1, 33, 1}),
                         [](const ::testing::TestParamInfo<SoftmaxCase>& info) {
                           return std::to_string(info.param.rows) + "x" + std::to_string(info.param.cols);
                         });

// One library serves every value of a symbolic dim; tails come from the scalar argument.
TEST_F(EndToEndTest, SymbolicRowsRunWithAnyValue) {
  TensorGraphBuilder b("softmax_dyn");
  b.add_dyn_dim("M");
  std::vector<int64_t> tile = {16, 64};
  int x = b.add_param("x", {Expr::var("M"), Expr(96)}, DataType::FP32);
  int m = b.add_reduce(TensorOpKind::Amax, x, -1, true, tile, testing::TestLoc());
  int d = b.add_binary(TensorOpKind::Sub, x, m, tile, testing::TestLoc());
  int e = b.add_unary(TensorOpKind::Exp, d, tile, testing::TestLoc());
  int s = b.add_reduce(TensorOpKind::Sum, e, -1, true, tile, testing::TestLoc());
  b.set_outputs({b.add_binary(TensorOpKind::Div, e, s, tile, testing::TestLoc())});
  auto p = codegen::compile_program(b.finish(), PassOptions{});
  for (int64_t rows : {int64_t{40}, int64_t{16}, int64_t{3}}) {
    SCOPED_TRACE("M = " + std::to_string(rows));
    EXPECT_EQ(p->count_tasks({rows}), (rows + 15) / 16);
    std::vector<float> xv = RandomMatrix(rows, 96, static_cast<unsigned>(rows));
    std::vector<float> y(xv.size(), std::nanf(""));
    EXPECT_EQ(RunProgram(*p, {Describe(xv, {rows, 96}), Describe(y, {rows, 96})}, {rows}), (rows + 15) / 16);
    ExpectClose(y, ReferenceSoftmax(xv, rows, 96), 96);
  }
}

// Column reductions, column broadcasts, a rank-1 operand and a keepdim=False
// reduction, with tails in both dims: the instructions softmax does not use.
TEST_F(EndToEndTest, ColumnOpsAndRankOneBroadcastMatchReference) {
  const int64_t R = 45, C = 70;
  TensorGraphBuilder b("colops");
  std::vector<int64_t> tile = {16, 32};
  int x = b.add_param("x", {Expr(R), Expr(C)}, DataType::FP32);
  int v = b.add_param("v", {Expr(C)}, DataType::FP32);
  int s = b.add_reduce(TensorOpKind::Sum, x, 0, true, tile, testing::TestLoc());    // [1, C]
  int y = b.add_binary(TensorOpKind::Sub, x, s, tile, testing::TestLoc());          // x - colsum
  int z = b.add_binary(TensorOpKind::Mul, v, y, tile, testing::TestLoc());          // v * y
  int w = b.add_reduce(TensorOpKind::Amax, z, 1, false, tile, testing::TestLoc());  // [R]
  int u = b.add_binary(TensorOpKind::Max, z, b.add_reduce(TensorOpKind::Amax, y, 0, false, tile, testing::TestLoc()),
                       tile, testing::TestLoc());  // maximum(z, colmax(y)) with a [C] operand
  b.set_outputs({z, w, u});
  auto p = codegen::compile_program(b.finish(), PassOptions{});

  std::vector<float> xv = RandomMatrix(R, C, 11), vv = RandomMatrix(1, C, 12);
  std::vector<float> zg(R * C, std::nanf("")), wg(R, std::nanf("")), ug(R * C, std::nanf(""));
  RunProgram(*p, {Describe(xv, {R, C}), Describe(vv, {C}), Describe(zg, {R, C}), Describe(wg, {R}), Describe(ug, {R, C})});

  std::vector<float> colsum(C, 0.0f), colmax(C, -INFINITY), zr(R * C), wr(R, -INFINITY), ur(R * C);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) colsum[c] += xv[r * C + c];
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) colmax[c] = std::max(colmax[c], xv[r * C + c] - colsum[c]);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = 0; c < C; ++c) {
      float yv = xv[r * C + c] - colsum[c];
      zr[r * C + c] = vv[c] * yv;
      wr[r] = std::max(wr[r], zr[r * C + c]);
      ur[r * C + c] = std::max(zr[r * C + c], colmax[c]);
    }
  // Column sums are accumulated in another order than here: allow for rounding.
  auto close = [](const std::vector<float>& got, const std::vector<float>& want, const char* what) {
    for (size_t i = 0; i < got.size(); ++i)
      if (!(std::fabs(got[i] - want[i]) <= 1e-3f * (1.0f + std::fabs(want[i])))) {
        ADD_FAILURE() << what << "[" << i << "]: got " << got[i] << ", want " << want[i];
        return;
      }
  };
  close(zg, zr, "z");
  close(wg, wr, "w");
  close(ug, ur, "u");
}

TEST_F(EndToEndTest, SecondCompileLoadsFromDisk) {
  // A graph no other test compiles, so the first build is certainly a miss.
  TensorGraph g = testing::AddGraph({Expr(48), Expr(40)}, {16, 16});
  auto first = codegen::compile_program(g, PassOptions{});
  EXPECT_EQ(first->build.cache, "compiled");
  EXPECT_GT(first->build.compile_seconds, 0.0);
  auto second = codegen::compile_program(g, PassOptions{});
  EXPECT_NE(first.get(), second.get());
  EXPECT_EQ(second->build.cache, "disk");
  EXPECT_EQ(second->build.compile_seconds, 0.0);
  EXPECT_EQ(second->build.key, first->build.key);
  EXPECT_EQ(second->build.library, first->build.library);
  EXPECT_EQ(second->build.library.rfind(*cache_dir_ + "/", 0), 0u) << second->build.library;

  // The loaded library computes, not just loads.
  std::vector<float> a(48 * 40), bv(48 * 40), out(48 * 40, std::nanf(""));
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<float>(i);
    bv[i] = 0.5f * static_cast<float>(i);
  }
  EXPECT_EQ(RunProgram(*second, {Describe(a, {48, 40}), Describe(bv, {48, 40}), Describe(out, {48, 40})}), 3 * 3);
  for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(out[i], 1.5f * static_cast<float>(i)) << "element " << i;
}

TEST_F(EndToEndTest, MissingCompilerIsACompileError) {
  ScopedEnv cxx("CXX", "/nonexistent/pypto-test/c++");
  try {
    codegen::compile_program(testing::SoftmaxGraph(64, 1024), PassOptions{});
    FAIL() << "compile_program succeeded without a compiler";
  } catch (const CompileError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/pypto-test/c++"), std::string::npos) << e.what();
  }
}

// A compiler that runs but fails must name the kernel and where its source and log were kept.
TEST_F(EndToEndTest, FailingCompilerReportsKernelSourceAndLog) {
  ScopedEnv cxx("CXX", "false");
  try {
    codegen::compile_program(testing::SoftmaxGraph(64, 1024), PassOptions{});
    FAIL() << "compile_program succeeded with a failing compiler";
  } catch (const CompileError& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("kernel 'softmax'"), std::string::npos) << msg;
    EXPECT_NE(msg.find(*cache_dir_), std::string::npos) << msg;
    EXPECT_NE(msg.find(".cc"), std::string::npos) << msg;
    EXPECT_NE(msg.find(".log"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace pypto
