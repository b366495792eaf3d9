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

/// Bumped whenever a struct or function table below changes layout, or a mode is added.
#define PYPTO_ABI_VERSION 7
/// Statuses a generated orchestration or kernel returns; 0 is success.
/// A runtime call failed (the runtime recorded why).
#define PYPTO_STATUS_FAILED 1
/// The entry or a kernel was called with another number of tensors or scalars than it takes.
#define PYPTO_STATUS_ARGUMENTS 2
/// A reshape of a tensor that is not contiguous in memory.
#define PYPTO_STATUS_RESHAPE 3
/// A region of a CALL (or a view) outside its tensor; pypto_error_message() says which.
#define PYPTO_STATUS_REGION 4
/// A kernel's access outside the region it was given; pypto_take_kernel_error() says which.
#define PYPTO_STATUS_ACCESS 5
/// A symbolic divisor (or loop step) that is zero at run time; pypto_error_message() says which.
#define PYPTO_STATUS_ZERO 6
/// A kernel's gather or scatter index outside its axis; pypto_take_kernel_error() says which.
#define PYPTO_STATUS_INDEX 7
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

/// A whole tensor passed to an orchestration function; `buffer` as in pypto_region.
typedef struct pypto_tensor {
  void* data;
  void* buffer;
  int64_t shape[PYPTO_MAX_DIMS];
  int64_t stride[PYPTO_MAX_DIMS];
  int32_t ndim;
  int32_t elem_size;
} pypto_tensor;

/// How a task accesses an argument (dependencies follow from it). A task that only adds into a
/// region with atomic additions (ACCUM) is ordered against earlier reads and writes of it and later
/// ones are ordered against it, but tasks accumulating into one region are not ordered among
/// themselves.
#define PYPTO_ACCESS_IN 1
#define PYPTO_ACCESS_OUT 2
#define PYPTO_ACCESS_ACCUM 3

/// One argument of a task submitted with `task_submit_desc`: a box of a tensor registered with
/// `tensor_handle`. `offset` and `extent` hold one entry per dim of the tensor.
typedef struct pypto_task_arg {
  int32_t tensor;
  int32_t mode;
  const int64_t* offset;
  const int64_t* extent;
} pypto_task_arg;

/// A task: its kernel `fn` (named `name`, needing `buffer_bytes` of tile buffers), its arguments
/// (the kernel receives their regions in this order) and its scalars (passed to the kernel as given).
typedef struct pypto_task_desc {
  const char* name;
  pypto_kernel_fn fn;
  int64_t buffer_bytes;
  const pypto_task_arg* args;
  const int64_t* scalars;
  int32_t nargs;
  int32_t nscalars;
} pypto_task_desc;

/// The services the runtime offers to generated orchestration code.
typedef struct pypto_runtime_api {
  int32_t abi_version;
  /// Opaque runtime handle passed back to every call below.
  void* rt;
  /// Zero-initialised scratch memory that lives until the run ends.
  void* (*alloc_workspace)(void* rt, int64_t bytes);
  /// Non-zero once a task has failed: orchestration may stop submitting.
  int32_t (*failed)(void* rt);
  /// The handle of a tensor's layout (data, buffer, strides, rank, element size; the shape is not
  /// used) for `task_submit_desc`, valid until the run ends; -1 when the run has failed. One layout
  /// always gets the same handle, so orchestration registers each tensor and view once.
  int32_t (*tensor_handle)(void* rt, const pypto_tensor* tensor);
  /// Submits a task (the only way to: it runs once the tasks it depends on through its arguments have
  /// finished); returns non-zero once the run has failed, and the orchestration should then stop.
  int32_t (*task_submit_desc)(void* rt, const pypto_task_desc* task);
  /// Scratch memory like `alloc_workspace`'s whose contents are unspecified (for a tensor whose
  /// every element is written before it is read).
  void* (*alloc_workspace_uninit)(void* rt, int64_t bytes);
} pypto_runtime_api;

/// The generic tile copies (TLOAD and TSTORE of elements of one type, as bits), compiled once per
/// target into the runtime: a kernel library built to call them (the toolchain defines
/// PTO_OUT_OF_LINE_COPIES) exports `pypto_bind_tile_copies(const pypto_tile_copies*)`, which the
/// loader calls with its target's table before any kernel runs. `load` and `store` are indexed by
/// the element size class (0, 1, 2, 3 for 1, 2, 4, 8 bytes); `store_stream` stores floats with
/// streaming stores where the target has them. `load_half` loads fp16 ([0]) or bf16 ([1]) elements
/// into a float tile, `store_half` stores a float tile as fp16 ([0]) or bf16 ([1]), rounding to
/// nearest even. `load_panels` loads float ([0]), fp16 ([1]) or bf16 ([2]) elements into a float
/// tile of `cols` columns laid out in column panels of `width` columns (TLOAD ... panels=width).
#define PYPTO_TILE_COPIES_VERSION 2
typedef struct pypto_tile_copies {
  int32_t version;
  void (*load[4])(void* dst, int64_t cols, int32_t rank, const int64_t* tshape, const void* src, const int64_t* stride,
                  const int64_t* valid);
  void (*store[4])(void* dst, const int64_t* stride, const int64_t* valid, int32_t rank, const int64_t* tshape,
                   const void* src, int64_t cols);
  void (*store_stream)(void* dst, const int64_t* stride, const int64_t* valid, int32_t rank, const int64_t* tshape,
                       const void* src, int64_t cols);
  void (*load_half[2])(void* dst, int64_t cols, int32_t rank, const int64_t* tshape, const void* src,
                       const int64_t* stride, const int64_t* valid);
  void (*store_half[2])(void* dst, const int64_t* stride, const int64_t* valid, int32_t rank, const int64_t* tshape,
                        const void* src, int64_t cols);
  void (*load_panels[3])(void* dst, int64_t width, int64_t cols, int32_t rank, const int64_t* tshape, const void* src,
                         const int64_t* stride, const int64_t* valid);
} pypto_tile_copies;

/// Signature of the orchestration entry point of a generated library:
/// tensors are the parameters then the outputs of the traced function,
/// scalars the values of its symbolic dims. Returns 0 on success.
typedef int32_t (*pypto_orchestration_fn)(const pypto_runtime_api* api, const pypto_tensor* tensors,
                                          int32_t ntensors, const int64_t* scalars, int32_t nscalars);

#ifdef __cplusplus
}
#endif

#endif  // PYPTO_ABI_H_
