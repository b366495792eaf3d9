/// The C ABI between generated code and the pypto runtime.
///
/// Generated orchestration and InCore code includes this header (codegen embeds
/// its text into every generated source file, so a generated library needs no
/// include path). It is plain C so that the ABI stays stable across compilers;
/// the runtime implements the function table, generated code only calls it.
#ifndef PYPTO_ABI_H_
#define PYPTO_ABI_H_

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// Bumped whenever a struct or function table below changes layout.
#define PYPTO_ABI_VERSION 2
/// Highest tensor rank a region can describe.
#define PYPTO_MAX_DIMS 6

/// A box of a strided tensor: `base` is the tensor's element 0, `offset`/
/// `extent` select the box in elements, `stride` gives the element strides per
/// dim. `buffer` names the allocation the tensor lives in (views of one
/// allocation share it); dependencies are tracked per buffer, and NULL means
/// `base`.
typedef struct pypto_region {
  void* base;
  void* buffer;
  int64_t offset[PYPTO_MAX_DIMS];
  int64_t extent[PYPTO_MAX_DIMS];
  int64_t stride[PYPTO_MAX_DIMS];
  int32_t ndim;
  int32_t elem_size;
} pypto_region;

/// An InCore kernel: receives its region arguments (in the order they were
/// added) and its scalar arguments (block indices, symbolic dims), and returns
/// 0 on success, non-zero on failure.
typedef int32_t (*pypto_kernel_fn)(const pypto_region* args, int32_t nargs, const int64_t* scalars,
                                   int32_t nscalars);

/// The services the runtime offers to generated orchestration code.
typedef struct pypto_runtime_api {
  int32_t abi_version;
  /// Opaque runtime handle passed back to every call below.
  void* rt;
  /// Creates a task running `fn` (named `name`, needing `buffer_bytes` of tile
  /// buffers); returns its id. Regions are added before `submit`.
  int64_t (*task_alloc)(void* rt, const char* name, pypto_kernel_fn fn, int64_t buffer_bytes);
  void (*task_add_input)(void* rt, int64_t task, const pypto_region* region);
  void (*task_add_output)(void* rt, int64_t task, const pypto_region* region);
  /// Appends a scalar argument; the kernel receives scalars in the order added.
  void (*task_add_scalar)(void* rt, int64_t task, int64_t value);
  /// Makes the task visible to the scheduler; it runs once its inputs are ready.
  void (*task_submit)(void* rt, int64_t task);
  /// Zero-initialised scratch memory that lives until the run ends.
  void* (*alloc_workspace)(void* rt, int64_t bytes);
  /// Non-zero once a task has failed: orchestration may stop submitting.
  int32_t (*failed)(void* rt);
} pypto_runtime_api;

/// A whole tensor passed to an orchestration function; `buffer` as in pypto_region.
typedef struct pypto_tensor {
  void* data;
  void* buffer;
  int64_t shape[PYPTO_MAX_DIMS];
  int64_t stride[PYPTO_MAX_DIMS];
  int32_t ndim;
  int32_t elem_size;
} pypto_tensor;

/// Signature of the orchestration entry point of a generated library:
/// tensors are the parameters then the outputs of the traced function,
/// scalars the values of its symbolic dims. Returns 0 on success.
typedef int32_t (*pypto_orchestration_fn)(const pypto_runtime_api* api, const pypto_tensor* tensors,
                                          int32_t ntensors, const int64_t* scalars, int32_t nscalars);

#ifdef __cplusplus
}
#endif

#endif  // PYPTO_ABI_H_
