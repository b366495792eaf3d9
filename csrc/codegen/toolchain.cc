#include "codegen/toolchain.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include "codegen/cpp_emitter.h"
#include "runtime/pypto_abi.h"
#include "codegen/sha256.h"
#include "ir/errors.h"

extern char** environ;

namespace pypto::codegen {

namespace {

std::vector<std::string> split_spaces(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

bool is_executable(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

/// Resolves a command name through PATH ("" if not found).
std::string which(const std::string& name) {
  if (name.find('/') != std::string::npos) return is_executable(name) ? name : "";
  const char* path = std::getenv("PATH");
  if (!path) return "";
  std::istringstream in(path);
  std::string dir;
  while (std::getline(in, dir, ':')) {
    if (dir.empty()) dir = ".";
    std::string p = dir + "/" + name;
    if (is_executable(p)) return p;
  }
  return "";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// Identity of the compiler without running it: resolved path, size, mtime.
std::string compiler_identity(const std::vector<std::string>& cmd) {
  std::string path = which(cmd.at(0));
  struct stat st;
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return cmd[0];
  char real[4096];
  std::string resolved = ::realpath(path.c_str(), real) ? real : path;
  struct stat rst;
  if (::stat(resolved.c_str(), &rst) != 0) rst = st;
  return fmt::format("{}|{}|{}|{}", path, resolved, static_cast<long long>(rst.st_size),
                     static_cast<long long>(rst.st_mtime));
}

/// The CPU model and feature flags; -march=native code is only valid on them.
std::string cpu_identity() {
  static const std::string id = [] {
    std::ifstream in("/proc/cpuinfo");
    std::string line, model, flags;
    while (std::getline(in, line)) {
      if (model.empty() && line.rfind("model name", 0) == 0) model = line;
      if (flags.empty() && (line.rfind("flags", 0) == 0 || line.rfind("Features", 0) == 0)) flags = line;
      if (!model.empty() && !flags.empty()) break;
    }
    return model + "|" + flags;
  }();
  return id;
}

void make_dirs(const std::string& dir) {
  std::string cur;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') {
      if (!cur.empty()) ::mkdir(cur.c_str(), 0755);
    }
    if (i < dir.size()) cur += dir[i];
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw CompileError(fmt::format("cannot create the kernel cache directory '{}' (set PYPTO_CACHE_DIR)", dir));
}

std::string unique_suffix() {
  static std::atomic<unsigned> counter{0};
  std::random_device rd;
  return fmt::format("{}.{}.{:x}", ::getpid(), counter++, rd());
}

/// Writes `data` to `path` atomically (temporary file, then rename).
void write_atomic(const std::string& path, const std::string& data) {
  std::string tmp = path + ".tmp." + unique_suffix();
  {
    std::ofstream out(tmp, std::ios::binary);
    out << data;
    if (!out) throw CompileError(fmt::format("cannot write '{}'", tmp));
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw CompileError(fmt::format("cannot rename '{}' to '{}'", tmp, path));
  }
}

/// Runs `argv` without a shell, stdout and stderr into `log`; returns the exit status.
int run_process(const std::vector<std::string>& argv, const std::string& log) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1000 - rc;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

void* try_load(const std::string& path) {
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) return nullptr;
  using AbiFn = int32_t (*)();
  auto abi = reinterpret_cast<AbiFn>(::dlsym(h, kAbiSymbol));
  if (!abi || abi() != PYPTO_ABI_VERSION) return nullptr;
  return h;
}

}  // namespace

std::vector<std::string> compiler_command() {
  if (const char* cxx = std::getenv("CXX"); cxx && *cxx) {
    auto cmd = split_spaces(cxx);
    if (cmd.empty() || which(cmd[0]).empty())
      throw CompileError(fmt::format("CXX='{}' does not name an executable compiler", cxx));
    return cmd;
  }
  for (const char* c : {"c++", "g++", "clang++"})
    if (!which(c).empty()) return {c};
  throw CompileError("no C++ compiler found: set CXX or put c++, g++ or clang++ on PATH");
}

std::vector<std::string> compiler_flags() {
  return {"-std=c++17", "-O3", "-march=native", "-fno-math-errno", "-fopenmp-simd", "-fPIC", "-shared", "-w"};
}

std::string cache_dir() {
  if (const char* d = std::getenv("PYPTO_CACHE_DIR"); d && *d) return d;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/pypto";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/pypto";
}

BuildResult build_library(const std::string& source, const std::string& kernel) {
  std::vector<std::string> cmd = compiler_command();
  std::vector<std::string> flags = compiler_flags();
  std::string key_text = source;
  key_text += "\n--command--\n";
  for (const auto& a : cmd) key_text += a + "\x1f";
  for (const auto& a : flags) key_text += a + "\x1f";
  key_text += "\n--compiler--\n" + compiler_identity(cmd);
  key_text += "\n--cpu--\n" + cpu_identity();
  key_text += "\n--pypto--\n" PYPTO_VERSION;
  BuildResult r;
  r.key = sha256_hex(key_text);
  std::string dir = cache_dir() + "/" + r.key.substr(0, 2);
  make_dirs(dir);
  std::string base = dir + "/" + r.key;
  r.library = base + ".so";
  r.source_path = base + ".cc";

  struct stat st;
  if (::stat(r.library.c_str(), &st) == 0) {
    if ((r.handle = try_load(r.library))) {
      r.cache = "disk";
      return r;
    }
    std::remove(r.library.c_str());  // damaged entry: rebuild it
  }

  write_atomic(r.source_path, source);
  std::string tmp_lib = base + ".so.tmp." + unique_suffix();
  std::string log = base + ".log";
  std::string tmp_log = log + ".tmp." + unique_suffix();
  std::vector<std::string> argv = cmd;
  argv.insert(argv.end(), flags.begin(), flags.end());
  argv.insert(argv.end(), {"-o", tmp_lib, r.source_path});
  auto t0 = std::chrono::steady_clock::now();
  int rc = run_process(argv, tmp_log);
  r.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::rename(tmp_log.c_str(), log.c_str());
  if (rc != 0) {
    std::remove(tmp_lib.c_str());
    std::string text = read_file(log);
    if (text.size() > 4000) text = text.substr(0, 4000) + "\n...";
    throw CompileError(fmt::format("compiling kernel '{}' failed ({}); source: {}; compiler log: {}\n{}", kernel,
                                   rc <= -1000 ? fmt::format("cannot start '{}'", cmd[0]) : fmt::format("exit {}", rc),
                                   r.source_path, log, text));
  }
  if (std::rename(tmp_lib.c_str(), r.library.c_str()) != 0) {
    std::remove(tmp_lib.c_str());
    throw CompileError(fmt::format("cannot move the built kernel '{}' into the cache at '{}'", kernel, r.library));
  }
  r.handle = try_load(r.library);
  if (!r.handle) {
    const char* err = ::dlerror();
    throw CompileError(fmt::format("cannot load the built kernel '{}' from '{}': {}", kernel, r.library, err ? err : "ABI mismatch"));
  }
  r.cache = "compiled";
  return r;
}

void* library_symbol(void* handle, const char* name, const std::string& library) {
  void* s = ::dlsym(handle, name);
  if (!s) throw CompileError(fmt::format("kernel library '{}' has no symbol '{}'", library, name));
  return s;
}

}  // namespace pypto::codegen
