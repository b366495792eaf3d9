#include "codegen/toolchain.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <mutex>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "codegen/cpp_emitter.h"
#include "runtime/pypto_abi.h"
#include "codegen/sha256.h"
#include "codegen/tile_copies.h"
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

/// Identity of the compiler without running it: the resolved path of the file it runs, its size and
/// mtime (c++ and g++ naming the same file are the same compiler: a prelude precompiled under one
/// name serves the other).
std::string compiler_identity(const std::vector<std::string>& cmd) {
  std::string path = which(cmd.at(0));
  struct stat st;
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return cmd[0];
  char real[4096];
  std::string resolved = ::realpath(path.c_str(), real) ? real : path;
  struct stat rst;
  if (::stat(resolved.c_str(), &rst) != 0) rst = st;
  return fmt::format("{}|{}|{}", resolved, static_cast<long long>(rst.st_size), static_cast<long long>(rst.st_mtime));
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

/// Creates `dir` and its missing parents; what it creates is private to the user (0700).
void make_dirs(const std::string& dir) {
  std::string cur;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') {
      if (!cur.empty()) ::mkdir(cur.c_str(), 0700);
    }
    if (i < dir.size()) cur += dir[i];
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    throw CompileError(fmt::format("cannot create the kernel cache directory '{}' (set PYPTO_CACHE_DIR)", dir));
}

/// Why another user could plant files in `dir` ("" when it is a directory of this user's that
/// nobody else may write).
std::string unsafe_reason(const std::string& dir) {
  struct stat st;
  if (::lstat(dir.c_str(), &st) != 0) return "";
  if (S_ISLNK(st.st_mode) && ::stat(dir.c_str(), &st) != 0) return "";
  if (!S_ISDIR(st.st_mode)) return "it is not a directory";
  if (st.st_uid != ::geteuid()) return fmt::format("it belongs to user id {}", st.st_uid);
  if (st.st_mode & (S_IWGRP | S_IWOTH)) return fmt::format("others may write to it (mode {:o})", st.st_mode & 07777);
  return "";
}

/// A directory only this process's user may use, for when the cache directory is not safe.
std::string private_fallback_dir() {
  static const std::string dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string templ = std::string(tmp && *tmp ? tmp : "/tmp") + fmt::format("/pypto-cache-{}-XXXXXX", ::geteuid());
    std::vector<char> buf(templ.begin(), templ.end());
    buf.push_back('\0');
    if (::mkdtemp(buf.data()) == nullptr)
      throw CompileError(fmt::format("cannot create a private kernel cache directory '{}'", templ));
    return std::string(buf.data());
  }();
  return dir;
}

/// The cache directory to use: `cache_dir()`, created private if missing; when another user could
/// write to it, a warning and a private directory of this process instead (pypto never loads
/// code from a directory someone else controls).
std::string safe_cache_dir() {
  std::string dir = cache_dir();
  make_dirs(dir);
  std::string why = unsafe_reason(dir);
  if (why.empty()) return dir;
  static std::once_flag warned;
  std::string fallback = private_fallback_dir();
  std::call_once(warned, [&] {
    std::cerr << fmt::format("pypto: warning: not using the kernel cache directory '{}': {}; using '{}' instead "
                             "(set PYPTO_CACHE_DIR to a directory of your own)\n", dir, why, fallback);
  });
  return fallback;
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

/// Seconds a host compile may take: PYPTO_COMPILE_TIMEOUT (a positive number), default 300.
double compile_timeout() {
  const char* v = std::getenv("PYPTO_COMPILE_TIMEOUT");
  if (!v || !*v) return 300.0;
  char* end = nullptr;
  errno = 0;
  double t = std::strtod(v, &end);
  if (errno != 0 || end == v || *end != '\0' || !(t > 0) || t > 1e9)
    throw UserError(fmt::format("PYPTO_COMPILE_TIMEOUT must be a positive number of seconds, found '{}'", v));
  return t;
}

/// Exit status of a process that ran past its time limit (see run_process).
constexpr int kTimedOut = -2;

/// Runs `argv` without a shell, stdout and stderr into `log`, in a process group of its own;
/// returns the exit status, or kTimedOut after killing the group when it runs past `timeout`
/// seconds.
int run_process(const std::vector<std::string>& argv, const std::string& log, double timeout) {
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attr, 0);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  int rc = posix_spawnp(&pid, args[0], &fa, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) return -1000 - rc;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout);
  int status = 0;
  int64_t nap_us = 200;
  for (;;) {
    pid_t done = ::waitpid(pid, &status, WNOHANG);
    if (done == pid) break;
    if (done < 0 && errno != EINTR) return -1;
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(-pid, SIGKILL);  // the driver and the compilers it started
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      return kTimedOut;
    }
    ::usleep(static_cast<useconds_t>(nap_us));
    nap_us = std::min<int64_t>(nap_us * 2, 20000);
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

/// The record kept beside a cache entry's library: its size and SHA-256, written before the
/// library is moved into place.
std::string library_record(const std::string& bytes) {
  return fmt::format("pypto-library {} {}\n", bytes.size(), sha256_hex(bytes));
}

/// dlopens `path` and binds its out-of-line copies to `copies`; nullptr (and the library closed
/// again) when it does not load, reports another ABI version or cannot take `copies`, so that a
/// rebuilt library at the same path is loaded anew.
void* load_library(const std::string& path, const pypto_tile_copies* copies) {
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) return nullptr;
  using AbiFn = int32_t (*)();
  auto abi = reinterpret_cast<AbiFn>(::dlsym(h, kAbiSymbol));
  bool ok = abi && abi() == PYPTO_ABI_VERSION;
  // A library built to call the out-of-line copies gets its target's table before any kernel runs.
  using BindFn = int32_t (*)(const pypto_tile_copies*);
  if (auto bind = reinterpret_cast<BindFn>(::dlsym(h, kBindCopiesSymbol)); ok && bind)
    ok = copies != nullptr && bind(copies) == 0;
  if (!ok) {
    ::dlclose(h);
    return nullptr;
  }
  return h;
}

/// Loads the cache entry at `library` if it is whole: its record exists and its bytes have the
/// size and SHA-256 the record gives (a truncated or replaced file is not loaded). nullptr
/// otherwise.
void* try_load(const std::string& library, const std::string& record_path, const pypto_tile_copies* copies) {
  struct stat st;
  if (::stat(library.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return nullptr;
  std::string record = read_file(record_path);
  if (record.empty()) return nullptr;
  if (record != library_record(read_file(library))) return nullptr;
  // The cache directory is private to this user (safe_cache_dir), so nobody else can swap the
  // file between the check and the load.
  return load_library(library, copies);
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

std::vector<std::string> compiler_flags(const Target& target) {
  // -fno-trapping-math lets GCC if-convert the selects of the vector math (exp, log, tanh, ...) when the
  // ISA has no masked operations (AVX2): without it those loops stay scalar there. Kernels do not read
  // the floating-point exception flags, so nothing else changes.
  // -ffp-contract=off: every operation of a kernel rounds as written (a fused chain evaluates several
  // instructions in one loop, and a multiply feeding an add there must not become one fused
  // multiply-add); the tile library asks for fused multiply-adds explicitly (vm::fmadd, matmul_tile).
  std::vector<std::string> flags = {"-std=c++17", "-O3"};
  flags.insert(flags.end(), target.flags.begin(), target.flags.end());
  for (const char* f : {"-fno-math-errno", "-fno-trapping-math", "-ffp-contract=off", "-fopenmp-simd", "-fPIC", "-shared", "-w"})
    flags.push_back(f);
#ifdef PYPTO_SANITIZE_FLAGS
  // A sanitized build (CMake PYPTO_SANITIZE) compiles generated kernels with the same sanitizers.
  for (const auto& f : split_spaces(PYPTO_SANITIZE_FLAGS)) flags.push_back(f);
  flags.push_back("-fno-omit-frame-pointer");
#endif
  return flags;
}

std::vector<std::string> jit_flags(const Target& target, const pypto_tile_copies* copies) {
  std::vector<std::string> flags = compiler_flags(target);
  if (copies != nullptr) flags.push_back("-DPTO_OUT_OF_LINE_COPIES");
  return flags;
}

std::string cache_dir() {
  if (const char* d = std::getenv("PYPTO_CACHE_DIR"); d && *d) return d;
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg) return std::string(xdg) + "/pypto";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : "/tmp") + "/.cache/pypto";
}

namespace {

/// Builds the precompiled form of `header` (holding `prelude`) into `gch`; a failure leaves none.
/// Returns the compiler's exit status (0: built).
int build_precompiled_prelude(const std::vector<std::string>& cmd, const std::vector<std::string>& flags,
                              const std::string& prelude, const std::string& header, const std::string& gch,
                              std::string* log_text = nullptr) {
  write_atomic(header, prelude);
  const std::string tmp = gch + ".tmp." + unique_suffix();
  std::vector<std::string> argv = cmd;
  for (const auto& f : flags)
    if (f != "-shared") argv.push_back(f);
  argv.insert(argv.end(), {"-x", "c++-header", header, "-o", tmp});
  const std::string log = tmp + ".log";
  int rc = run_process(argv, log, compile_timeout());
  if (log_text) *log_text = read_file(log);
  std::remove(log.c_str());
  if (rc == 0 && std::rename(tmp.c_str(), gch.c_str()) != 0) rc = -1;
  if (rc != 0) std::remove(tmp.c_str());
  return rc;
}

/// The file name of the precompiled prelude of one prelude, flags, compiler and (for -march=native
/// code, which is only valid on its CPU) CPU: the same in the kernel cache and in the installed
/// package.
std::string prelude_header_name(const std::vector<std::string>& flags, const std::string& compiler,
                                const std::string& prelude, const Target& target) {
  std::string key = prelude + "\n--flags--\n";
  for (const auto& f : flags) key += f + "\x1f";
  key += "\n--compiler--\n" + compiler + "\n--pypto--\n" PYPTO_VERSION;
  if (target.name == "native") key += "\n--cpu--\n" + cpu_identity();
  return "prelude_" + sha256_hex(key).substr(0, 32) + ".h";
}

/// `dir`/`name` when it holds `prelude` and its precompiled form is there, else "".
std::string ready_header(const std::string& dir, const std::string& name, const std::string& prelude) {
  const std::string header = dir + "/" + name;
  struct stat st;
  if (::stat((header + ".gch").c_str(), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
      read_file(header) == prelude)
    return header;
  return "";
}

/// The `pch/` folder beside the loaded pypto library (the extension module of an installed package),
/// where the install step leaves the precompiled prelude of the native target; "" when it is missing
/// or others than its owner may write to it.
const std::string& installed_pch_dir() {
  static const std::string dir = [] {
    Dl_info info{};
    if (!::dladdr(reinterpret_cast<const void*>(&installed_pch_dir), &info) || !info.dli_fname) return std::string();
    std::string lib = info.dli_fname;
    const size_t slash = lib.rfind('/');
    if (slash == std::string::npos) return std::string();
    std::string d = lib.substr(0, slash) + "/pch";
    struct stat st;
    if (::stat(d.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || (st.st_mode & (S_IWGRP | S_IWOTH))) return std::string();
    return d;
  }();
  return dir;
}

/// The prelude as a header whose precompiled form (one per prelude, flags and compiler) is built,
/// or "" when it is not built yet or the cache folder cannot hold it. The installed package's
/// `pch/` folder is looked in first, then the cache's. A missing one is built into the cache on a
/// background thread (once per process), so the compile that finds it missing compiles its whole
/// source at once rather than wait: a cold compile costs one compile, not a precompile and then a
/// compile; the kernels compiled after it include the header.
std::string precompiled_prelude(const std::vector<std::string>& cmd, const std::vector<std::string>& flags,
                                const std::string& compiler, const std::string& prelude, const Target& target) {
  const std::string name = prelude_header_name(flags, compiler, prelude, target);
  if (!installed_pch_dir().empty())
    if (std::string header = ready_header(installed_pch_dir(), name, prelude); !header.empty()) return header;
  const std::string dir = safe_cache_dir() + "/pch";
  make_dirs(dir);
  if (!unsafe_reason(dir).empty()) return "";
  if (std::string header = ready_header(dir, name, prelude); !header.empty()) return header;
  const std::string header = dir + "/" + name;
  const std::string gch = header + ".gch";
  // Never destroyed, and waited for at exit: a build that outlived the process would leave its
  // temporary file in the cache.
  static auto* mu = new std::mutex;
  static auto* done = new std::condition_variable;
  static auto* building = new std::set<std::string>;
  {
    std::lock_guard<std::mutex> lock(*mu);
    if (!building->insert(gch).second) return "";
    static const bool registered = [] {
      static const pid_t owner = ::getpid();
      std::atexit([] {
        if (::getpid() != owner) return;  // a forked child has no build thread to wait for
        std::unique_lock<std::mutex> lock(*mu);
        done->wait(lock, [] { return building->empty(); });
      });
      return true;
    }();
    (void)registered;
  }
  std::thread([cmd, flags, prelude, header, gch] {
    try {
      build_precompiled_prelude(cmd, flags, prelude, header, gch);
    } catch (...) {
      // Nothing to report to: without a precompiled prelude kernels compile their whole source.
    }
    std::lock_guard<std::mutex> lock(*mu);
    building->erase(gch);
    done->notify_all();
  }).detach();
  return "";
}

}  // namespace

BuildResult build_library(const std::string& source, const std::string& kernel, const Target& target,
                          const std::string& prelude) {
  std::vector<std::string> cmd = compiler_command();
  const pypto_tile_copies* copies = tile_copies_for(target);
  std::vector<std::string> flags = jit_flags(target, copies);
  std::string key_text = source;
  key_text += "\n--command--\n";
  for (const auto& a : cmd) key_text += a + "\x1f";
  for (const auto& a : flags) key_text += a + "\x1f";
  const std::string compiler = compiler_identity(cmd);
  key_text += "\n--compiler--\n" + compiler;
  // -march=native code is only valid on this CPU; a named target's runs on any CPU with its features.
  if (target.name == "native") key_text += "\n--cpu--\n" + cpu_identity();
  key_text += "\n--pypto--\n" PYPTO_VERSION;
  BuildResult r;
  r.key = sha256_hex(key_text);
  std::string dir = safe_cache_dir() + "/" + r.key.substr(0, 2);
  make_dirs(dir);
  if (std::string why = unsafe_reason(dir); !why.empty())
    throw CompileError(fmt::format("the kernel cache directory '{}' is not safe to load code from: {}", dir, why));
  std::string base = dir + "/" + r.key;
  r.library = base + ".so";
  r.source_path = base + ".cc";
  const std::string record_path = base + ".sum";

  if ((r.handle = try_load(r.library, record_path, copies))) {
    r.cache = "disk";
    return r;
  }
  // Missing, damaged, truncated or from another ABI: rebuild it.
  std::remove(r.library.c_str());

  write_atomic(r.source_path, source);
  std::string tmp_lib = base + ".so.tmp." + unique_suffix();
  std::string log = base + ".log";
  std::string tmp_log = log + ".tmp." + unique_suffix();
  const double timeout = compile_timeout();
  auto t0 = std::chrono::steady_clock::now();
  auto compile = [&](const std::string& path) {
    std::vector<std::string> argv = cmd;
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {"-o", tmp_lib, path});
    return run_process(argv, tmp_log, timeout);
  };
  int rc = -1;
  // The source's prelude (after its first line) as a precompiled header: the kernels alone are parsed.
  const size_t first_line = source.find('\n') + 1;
  bool compiled = false;
  if (!prelude.empty() && first_line > 0 && source.compare(first_line, prelude.size(), prelude) == 0) {
    if (std::string header = precompiled_prelude(cmd, flags, compiler, prelude, target); !header.empty()) {
      const std::string short_source = base + ".pch." + unique_suffix() + ".cc";
      write_atomic(short_source, source.substr(0, first_line) + "#include \"" + header + "\"\n" +
                                     source.substr(first_line + prelude.size()));
      rc = compile(short_source);
      std::remove(short_source.c_str());
      compiled = rc == 0 || rc == kTimedOut;
    }
  }
  // Otherwise, or when that failed (its log would name the short file), the whole source.
  if (!compiled) rc = compile(r.source_path);
  r.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::rename(tmp_log.c_str(), log.c_str());
  if (rc == kTimedOut) {
    std::remove(tmp_lib.c_str());
    throw CompileError(fmt::format("compiling kernel '{}' took longer than {} s and was stopped (PYPTO_COMPILE_TIMEOUT); "
                                   "source: {}; compiler log: {}", kernel, timeout, r.source_path, log));
  }
  if (rc != 0) {
    std::remove(tmp_lib.c_str());
    std::string text = read_file(log);
    if (text.size() > 4000) text = text.substr(0, 4000) + "\n...";
    throw CompileError(fmt::format("compiling kernel '{}' failed ({}); source: {}; compiler log: {}\n{}", kernel,
                                   rc <= -1000 ? fmt::format("cannot start '{}'", cmd[0]) : fmt::format("exit {}", rc),
                                   r.source_path, log, text));
  }
  struct stat st;
  if (::stat(tmp_lib.c_str(), &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) {
    std::remove(tmp_lib.c_str());
    throw CompileError(fmt::format("compiling kernel '{}': the compiler '{}' exited 0 but produced no output file; "
                                   "source: {}; compiler log: {}", kernel, cmd[0], r.source_path, log));
  }
  const std::string bytes = read_file(tmp_lib);
  write_atomic(record_path, library_record(bytes));
  if (std::rename(tmp_lib.c_str(), r.library.c_str()) != 0) {
    std::remove(tmp_lib.c_str());
    throw CompileError(fmt::format("cannot move the built kernel '{}' into the cache at '{}': {}", kernel, r.library,
                                   std::strerror(errno)));
  }
  r.handle = load_library(r.library, copies);
  if (!r.handle) {
    const char* err = ::dlerror();
    throw CompileError(fmt::format("cannot load the built kernel '{}' from '{}': {}", kernel, r.library, err ? err : "ABI mismatch"));
  }
  r.cache = "compiled";
  return r;
}

std::string precompile_prelude(const std::string& dir, const Target& target) {
  const std::vector<std::string> cmd = compiler_command();
  const std::vector<std::string> flags = jit_flags(target, tile_copies_for(target));
  const std::string prelude = emit_prelude(target);
  make_dirs(dir);
  const std::string header = dir + "/" + prelude_header_name(flags, compiler_identity(cmd), prelude, target);
  std::string log;
  const int rc = build_precompiled_prelude(cmd, flags, prelude, header, header + ".gch", &log);
  if (rc != 0) {
    std::remove(header.c_str());
    if (log.size() > 4000) log = log.substr(0, 4000) + "\n...";
    throw CompileError(fmt::format("precompiling the prelude of target '{}' with '{}' failed (exit {})\n{}", target.name,
                                   cmd[0], rc, log));
  }
  return header;
}

void* library_symbol(void* handle, const char* name, const std::string& library) {
  void* s = ::dlsym(handle, name);
  if (!s) throw CompileError(fmt::format("kernel library '{}' has no symbol '{}'", library, name));
  return s;
}

}  // namespace pypto::codegen
