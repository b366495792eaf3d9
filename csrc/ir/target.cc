#include "ir/target.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <atomic>
#include <mutex>
#include <sstream>

#include "ir/errors.h"

namespace pypto {
namespace {

#if defined(__x86_64__)
constexpr const char* kHostArch = "x86_64";
#elif defined(__aarch64__)
constexpr const char* kHostArch = "aarch64";
#else
constexpr const char* kHostArch = "other";
#endif

// The x86-64 psABI micro-architecture levels, as /proc/cpuinfo names their features.
const std::vector<std::string> kV2 = {"cx16", "lahf_lm", "popcnt", "pni", "ssse3", "sse4_1", "sse4_2"};
const std::vector<std::string> kV3Extra = {"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"};
const std::vector<std::string> kV4Extra = {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"};
// Features beyond the levels that the tile library may use when the CPU has them (native).
const std::vector<std::string> kOptional = {"avx512_bf16", "avx512_vnni", "amx_tile", "amx_bf16", "avx512_fp16",
                                            "avx512vbmi", "asimd", "asimdhp", "sve", "bf16", "fphp"};

std::vector<std::string> join(std::initializer_list<const std::vector<std::string>*> parts) {
  std::vector<std::string> out;
  for (const auto* p : parts) out.insert(out.end(), p->begin(), p->end());
  return out;
}

std::vector<std::string> read_host_features() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) == 0 || line.rfind("Features", 0) == 0) {
      std::istringstream words(line.substr(line.find(':') + 1));
      std::vector<std::string> out;
      for (std::string w; words >> w;) out.push_back(w);
      std::sort(out.begin(), out.end());
      return out;
    }
  }
  return {};
}

std::mutex g_host_mutex;
const std::vector<std::string>* g_host_override = nullptr;
std::atomic<uint64_t> g_host_generation{1};

int64_t cache_size(int name, int64_t fallback) {
  long v = ::sysconf(name);
  return v > 0 ? v : fallback;
}

void set_caches(Target& t) {
  t.l1d_bytes = cache_size(_SC_LEVEL1_DCACHE_SIZE, 32 << 10);
  t.l2_bytes = cache_size(_SC_LEVEL2_CACHE_SIZE, 1 << 20);
  t.l3_bytes = cache_size(_SC_LEVEL3_CACHE_SIZE, 32 << 20);
}

Target x86_level(const std::string& name, std::vector<std::string> features, TileLibrary lib, int bytes) {
  Target t;
  t.name = name;
  t.arch = "x86_64";
  t.features = std::move(features);
  t.library = lib;
  t.vector_bytes = bytes;
  t.flags = {"-march=" + name};
  set_caches(t);
  return t;
}

Target native_target() {
  Target t;
  t.name = "native";
  t.arch = kHostArch;
  const auto& host = host_features();
  auto has = [&](const std::string& f) { return std::binary_search(host.begin(), host.end(), f); };
  for (const auto& f : join({&kV2, &kV3Extra, &kV4Extra, &kOptional}))
    if (has(f)) t.features.push_back(f);
  bool x86 = t.arch == "x86_64";
  if (x86 && has("avx512f") && has("avx512bw") && has("avx512vl") && has("avx512dq")) {
    t.library = TileLibrary::Avx512;
    t.vector_bytes = 64;
  } else if (x86 && has("avx2") && has("fma")) {
    t.library = TileLibrary::Avx2;
    t.vector_bytes = 32;
  } else {
    t.library = x86 ? TileLibrary::Sse : TileLibrary::Generic;
    t.vector_bytes = 16;
  }
  t.flags = {"-march=native"};
  set_caches(t);
  return t;
}

}  // namespace

bool Target::has(const std::string& feature) const {
  return std::find(features.begin(), features.end(), feature) != features.end();
}

bool Target::int8_dot_products() const { return library == TileLibrary::Avx512 && has("avx512_vnni"); }

std::string Target::bf16_dot_products() const {
  if (library != TileLibrary::Avx512 || !has("avx512_bf16")) return "";
  return has("amx_tile") && has("amx_bf16") ? "amx" : "avx512";
}

std::string Target::library_name() const {
  switch (library) {
    case TileLibrary::Avx512: return "avx512";
    case TileLibrary::Avx2: return "avx2";
    case TileLibrary::Sse: return "sse";
    case TileLibrary::Generic: return "generic";
  }
  return "generic";
}

std::string Target::describe() const {
  std::string flag_text;
  for (const auto& f : flags) flag_text += (flag_text.empty() ? "" : " ") + f;
  const std::string bf16 = bf16_dot_products();
  return fmt::format("{}: {} with {}-byte vectors, tile library {}{}, L1d {} KiB, L2 {} KiB, L3 {} KiB, flags '{}'",
                     name, arch, vector_bytes, library_name(), bf16.empty() ? "" : " (bf16 dot products: " + bf16 + ")",
                     l1d_bytes >> 10, l2_bytes >> 10, l3_bytes >> 10, flag_text);
}

const std::vector<std::string>& target_names() {
  static const std::vector<std::string> names = {"native", "x86-64-v2", "x86-64-v3", "x86-64-v4", "generic"};
  return names;
}

Target target_by_name(const std::string& name) {
  if (name.empty() || name == "native") return native_target();
  if (name == "x86-64-v2") return x86_level(name, kV2, TileLibrary::Sse, 16);
  if (name == "x86-64-v3") return x86_level(name, join({&kV2, &kV3Extra}), TileLibrary::Avx2, 32);
  if (name == "x86-64-v4") return x86_level(name, join({&kV2, &kV3Extra, &kV4Extra}), TileLibrary::Avx512, 64);
  if (name == "generic") {
    // Portable vector code: the architecture's baseline, no ISA-specific intrinsics.
    Target t;
    t.name = name;
    t.arch = kHostArch;
    t.library = TileLibrary::Generic;
    t.vector_bytes = 16;
    if (t.arch == "x86_64") t.flags = {"-march=x86-64", "-mtune=generic"};
    if (t.arch == "aarch64") t.flags = {"-march=armv8-a"};
    set_caches(t);
    return t;
  }
  std::string known;
  for (const auto& n : target_names()) known += (known.empty() ? "" : ", ") + n;
  throw UserError(fmt::format("unknown CPU target '{}' (known: {})", name, known));
}

const std::vector<std::string>& host_features() {
  static const std::vector<std::string> real = read_host_features();
  std::lock_guard<std::mutex> lock(g_host_mutex);
  return g_host_override ? *g_host_override : real;
}

uint64_t host_features_generation() { return g_host_generation.load(std::memory_order_acquire); }

void set_host_features_for_testing(const std::vector<std::string>* features) {
  static std::vector<std::string> stored;
  std::lock_guard<std::mutex> lock(g_host_mutex);
  g_host_generation.fetch_add(1, std::memory_order_acq_rel);
  if (features == nullptr) {
    g_host_override = nullptr;
    return;
  }
  stored = *features;
  std::sort(stored.begin(), stored.end());
  g_host_override = &stored;
}

std::vector<std::string> missing_on_host(const Target& t) {
  if (t.arch != kHostArch) return {fmt::format("{} code (this CPU is {})", t.arch, kHostArch)};
  const auto& host = host_features();
  std::vector<std::string> out;
  for (const auto& f : t.features)
    if (!std::binary_search(host.begin(), host.end(), f)) out.push_back(f);
  return out;
}

}  // namespace pypto
