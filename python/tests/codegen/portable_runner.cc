// A minimal sequential host for one generated pypto library, for running `generic` code where
// the pypto runtime is not built (an ARM64 binary under user-mode emulation): it implements
// pypto_runtime_api by running each task as it is submitted (in submission order, which honours
// every dependency), on tensors read from and written back to raw files.
//
//   runner NSCALARS S... NTENSORS (PATH ELEM_SIZE NDIM D...)...
//
// Tensors are dense row-major; every tensor is written back to its file after the run.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "pypto_abi.h"

extern "C" int32_t pypto_orchestrate(const pypto_runtime_api* api, const pypto_tensor* tensors, int32_t ntensors,
                                     const int64_t* scalars, int32_t nscalars);
extern "C" const char* pypto_error_message(void);
extern "C" int32_t pypto_take_kernel_error(char* out, int32_t cap);

namespace {

struct Host {
  std::vector<pypto_tensor> layouts;
  std::vector<void*> workspaces;
  int32_t failed = 0;
};

void* alloc_workspace(void* rt, int64_t bytes) {
  void* p = std::calloc(1, bytes > 0 ? static_cast<size_t>(bytes) : 1);
  static_cast<Host*>(rt)->workspaces.push_back(p);
  return p;
}
int32_t failed(void* rt) { return static_cast<Host*>(rt)->failed; }
int32_t tensor_handle(void* rt, const pypto_tensor* t) {
  auto& v = static_cast<Host*>(rt)->layouts;
  v.push_back(*t);
  return static_cast<int32_t>(v.size() - 1);
}
int32_t task_submit_desc(void* rt, const pypto_task_desc* d) {
  Host* h = static_cast<Host*>(rt);
  std::vector<pypto_region> regions(d->nargs);
  for (int32_t i = 0; i < d->nargs; ++i) {
    const pypto_tensor& t = h->layouts[d->args[i].tensor];
    pypto_region& r = regions[i];
    std::memset(&r, 0, sizeof r);
    r.base = t.data;
    r.buffer = t.buffer;
    r.ndim = t.ndim;
    r.elem_size = t.elem_size;
    for (int32_t k = 0; k < t.ndim; ++k) {
      r.offset[k] = d->args[i].offset[k];
      r.extent[k] = d->args[i].extent[k];
      r.stride[k] = t.stride[k];
    }
  }
  if (d->fn(regions.data(), d->nargs, d->scalars, d->nscalars) != 0) {
    char text[512] = {0};
    pypto_take_kernel_error(text, sizeof text);
    std::fprintf(stderr, "task %s failed: %s\n", d->name, text);
    h->failed = 1;
  }
  return h->failed;
}

}  // namespace

int main(int argc, char** argv) {
  int a = 1;
  auto next = [&]() -> long long {
    if (a >= argc) {
      std::fprintf(stderr, "runner: too few arguments\n");
      std::exit(2);
    }
    return std::atoll(argv[a++]);
  };
  std::vector<int64_t> scalars(next());
  for (auto& s : scalars) s = next();
  std::vector<pypto_tensor> tensors(next());
  std::vector<const char*> paths;
  std::vector<size_t> sizes;
  for (auto& t : tensors) {
    std::memset(&t, 0, sizeof t);
    paths.push_back(argv[a++]);
    t.elem_size = static_cast<int32_t>(next());
    t.ndim = static_cast<int32_t>(next());
    size_t n = 1;
    for (int32_t k = 0; k < t.ndim; ++k) n *= static_cast<size_t>(t.shape[k] = next());
    for (int32_t k = t.ndim - 1, s = 1; k >= 0; --k) t.stride[k] = s, s *= static_cast<int32_t>(t.shape[k]);
    sizes.push_back(n * t.elem_size);
    t.data = std::aligned_alloc(64, (n * t.elem_size + 63) / 64 * 64 + 64);
    FILE* f = std::fopen(paths.back(), "rb");
    if (f == nullptr || std::fread(t.data, 1, sizes.back(), f) != sizes.back()) {
      std::fprintf(stderr, "runner: cannot read %zu bytes from %s\n", sizes.back(), paths.back());
      return 2;
    }
    std::fclose(f);
  }
  Host host;
  pypto_runtime_api api = {PYPTO_ABI_VERSION, &host, alloc_workspace, failed, tensor_handle, task_submit_desc,
                           alloc_workspace};
  int32_t rc = pypto_orchestrate(&api, tensors.data(), static_cast<int32_t>(tensors.size()), scalars.data(),
                                 static_cast<int32_t>(scalars.size()));
  if (rc != 0 || host.failed) {
    std::fprintf(stderr, "runner: the run failed (%d): %s\n", rc, pypto_error_message());
    return 1;
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    FILE* f = std::fopen(paths[i], "wb");
    std::fwrite(tensors[i].data, 1, sizes[i], f);
    std::fclose(f);
  }
  for (void* p : host.workspaces) std::free(p);
  return 0;
}
