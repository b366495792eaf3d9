"""pypto: a tile-programming JIT compiler for AI kernels on the CPU.

Write tensor code under ``@pypto.frontend.jit``; pypto traces it into a Tensor
Graph, lowers it through Tile, Block and Execution graphs, generates PTO
assembly and C++, builds it with the host compiler and runs it as a task graph
on the memory of your torch tensors or NumPy arrays.
"""

from pypto._dtypes import (
    DataType,
    DT_BF16,
    DT_BOOL,
    DT_DOUBLE,
    DT_FP16,
    DT_FP32,
    DT_INT8,
    DT_INT16,
    DT_INT32,
    DT_INT64,
    DT_UINT8,
    DT_UINT16,
    DT_UINT32,
    DT_UINT64,
    DT_FP8E4M3,
    DT_FP8E5M2,
    DT_FP8E8M0,
    DT_HF8,
    DT_FP8,
    DT_INT4,
    DT_FP4_E2M1,
    DT_FP4_E1M2,
    DT_FP4_E2M1X2,
    DT_FP4_E1M2X2,
    DT_HF4,
    DT_BOTTOM,
    bytes_of,
)
from pypto.errors import (
    CompileError,
    FeError,
    InternalError,
    NotSupportedError,
    PyptoError,
    TaskError,
    TracingError,
    PtoSyntaxError,
    UserError,
    UserTypeError,
    VerifyError,
)
from pypto import frontend
from pypto.frontend.tensor import Tensor
from pypto.frontend.config import (
    CubeTile, get_cube_tile_shapes, get_vec_tile_shapes, set_cube_tile_shapes, set_matrix_size, set_pass_options, set_vec_tile_shapes,
)
from pypto.frontend.jit import Compiled, compile, jit
from pypto.ops import (
    TABLE_FUNCTIONS as _TABLE_FUNCTIONS, amax, amin, argmax, argmin, argsort, atan2, axpy_, expand_exp_dif, greater, topk, tril_, triu_, cast, cumprod, cumsum, tril, triu, clamp, clip, gelu, layer_norm, lrelu, matmul, mean, prelu,
    prod, rms_norm, round, softmax, sum, var, where,
)
from pypto.frontend.symbolic import SymExpr, SymInt, ceildiv, max, min, to_sym, to_syms  # noqa: A004 - PyPTO's names
from pypto.frontend.tensor import DYN, DYNAMIC, STATIC, StatusType, tensor
from pypto.data_movement import deinterleave, fillpad, interleave, pack, pad, unpack
from pypto.rng import normal, uniform, uniform_impl
from pypto.quantization import dequantize, quant_mx, quantize, scaled_mm
from pypto.sorting import mrgsort, sort32
from pypto.convolution import ConvParams, ConvTile, conv, get_conv_tile_shapes, set_conv_tile_shapes
from pypto import pypto_impl
from pypto.indexing import (
    gathermask, get_scatter_mode, index_add, index_add_, index_add__ub, index_add_ub, index_put_, index_select, one_hot,
    scatter_, scatter_update,
)
from pypto.shape_ops import (
    arange, assemble, atomic_add, clone, concat, expand_clone, full, gather, ones, permute, reshape, scatter, squeeze, transpose, unsqueeze,
    view, zeros,
)

from pypto.frontend.control import cond, is_loop_begin, is_loop_end, loop, loop_unroll
from pypto.options import (
    CompStage, ConfigScope, RunMode, get_current_scope, set_semantic_label, get_codegen_options, get_debug_options, get_global_config, get_host_options, get_options_tree,
    get_pass_options, get_runtime_options, get_verify_options, options, reset_options, set_codegen_options,
    set_debug_options, set_global_config, set_host_options, set_options, set_print_options, set_runtime_options,
    set_verify_options,
)
from pypto import experimental
from pypto.element import Element, convert_to_element, element
from pypto.golden import VerifyWarning, pass_verify_print, pass_verify_save, set_verify_golden_data, verify
from pypto.frontend.function_base import Function
from pypto.frontend.config import get_cpu_target, op_wrapper, set_cpu_target
from pypto.frontend.function_block import from_torch, function, get_current_function, get_last_function
from pypto.log import (
    LogLevel, check, get_log_level, internal_check, log_debug, log_error, log_event, log_fatal, log_info, log_warn,
    raise_error, set_log_level,
)
from pypto import log as logging  # noqa: F401 - PyPTO's module name
from pypto.pass_config import (
    PassConfigKey, PassConfigs, get_pass_config, get_pass_configs, get_pass_default_config, set_pass_config,
    set_pass_default_config,
)
from pypto.enums import (
    ROUND_DOWN, ROUND_UP, AtomicRMWMode, AtomicType, CastMode, ConvReLuType, DequantScaleRoundingMode, OpType, OutType,
    PrecisionType, ReduceMode, ReLuType, SatStatus, SaturationMode, ScatterMode, TileOpFormat, TopKAlgo, TransMode,
)
from pypto.taskgraph import TaskGraph, get_task_window, set_task_window, visualize_task_graph
from pypto.memory import clear_output_cache, get_output_cache_limit, output_cache_info, set_output_cache_limit
from pypto.frontend.config import OptionWarning

SymbolicScalar = SymExpr  # PyPTO's name for a symbolic integer
symbolic_scalar = SymExpr

# The plain elementwise ops of the op table (add, exp, ...), made from their rows.
globals().update(_TABLE_FUNCTIONS)

__version__ = "0.1.0"

__all__ = [
    "DataType", "DT_FP32", "DT_FP16", "DT_BF16", "DT_DOUBLE", "DT_INT8", "DT_INT16", "DT_INT32", "DT_INT64",
    "DT_UINT8", "DT_UINT16", "DT_UINT32", "DT_UINT64", "DT_FP8E4M3", "DT_FP8E5M2", "DT_FP8E8M0", "DT_HF8", "DT_FP8",
    "DT_INT4", "DT_FP4_E2M1", "DT_FP4_E1M2", "DT_FP4_E2M1X2", "DT_FP4_E1M2X2", "DT_HF4", "DT_BOTTOM", "bytes_of",
    "DT_BOOL", "Tensor", "jit", "compile", "Compiled", "frontend", "set_vec_tile_shapes",
    "get_vec_tile_shapes", "set_pass_options", "SymExpr", "ceildiv", "min", "max",
    "amax", "amin", "argmax", "argmin", "argsort", "atan2", "expand_exp_dif", "axpy_", "tril_", "triu_", "topk", "TopKAlgo", "cast", "cumprod", "cumsum", "tril", "triu", "clamp", "clip", "gelu", "layer_norm", "lrelu", "mean", "prelu", "prod", "rms_norm",
    "softmax", "sum", "var",
    "where", "arange", "assemble", "atomic_add", "concat", "expand_clone", "full",
    "ones", "permute", "reshape", "squeeze", "transpose", "unsqueeze", "view", "zeros", "DYNAMIC", "DYN", "STATIC", "StatusType",
    "SymbolicScalar", "symbolic_scalar", "SymInt", "to_sym", "to_syms", "CubeTile", "tensor",
    "gather", "scatter", "normal", "uniform", "uniform_impl", "quantize", "dequantize", "pack", "unpack", "deinterleave", "fillpad", "interleave", "pad", "gathermask", "greater", "index_add", "index_add_", "index_add_ub", "index_add__ub", "get_scatter_mode", "index_put_", "index_select", "one_hot",
    "scatter_", "scatter_update", "loop", "loop_unroll", "cond", "is_loop_begin", "is_loop_end", "RunMode", "options", "experimental", "Element", "element", "convert_to_element", "VerifyWarning", "set_verify_golden_data", "from_torch", "function", "get_current_function", "get_last_function", "LogLevel", "check", "get_log_level", "internal_check", "log_debug", "log_error", "log_event", "log_fatal", "log_info", "log_warn", "raise_error", "set_log_level", "PassConfigKey", "PassConfigs", "get_pass_config", "get_pass_configs", "get_pass_default_config", "set_pass_config", "set_pass_default_config", "get_pass_options", "set_host_options", "get_host_options", "set_codegen_options", "get_codegen_options", "set_verify_options", "get_verify_options", "set_debug_options", "get_debug_options", "set_runtime_options", "get_runtime_options", "set_options", "reset_options", "set_print_options", "set_global_config", "get_global_config", "get_options_tree", "CompStage", "ConfigScope", "get_current_scope", "set_semantic_label", "OptionWarning", "matmul", "round", "ReLuType", "TransMode", "TileOpFormat", "CastMode", "DequantScaleRoundingMode", "ROUND_DOWN", "ROUND_UP", "quant_mx", "scaled_mm", "sort32", "mrgsort", "conv", "ConvTile", "ConvParams", "ConvReLuType", "set_conv_tile_shapes", "get_conv_tile_shapes", "SaturationMode", "PrecisionType", "ScatterMode", "ReduceMode", "AtomicRMWMode", "AtomicType", "OpType", "OutType",
    "SatStatus", "clone", "set_cube_tile_shapes", "get_cube_tile_shapes", "set_matrix_size",
    "PyptoError", "FeError", "Function", "op_wrapper", "verify", "pass_verify_print", "pass_verify_save",
    "set_cpu_target", "get_cpu_target", "TaskGraph", "visualize_task_graph", "set_task_window", "get_task_window",
    "set_output_cache_limit", "get_output_cache_limit", "output_cache_info", "clear_output_cache",
    "UserError", "UserTypeError", "VerifyError", "CompileError", "NotSupportedError", "InternalError", "TaskError", "TracingError", "PtoSyntaxError",
] + sorted(_TABLE_FUNCTIONS)


def __getattr__(name: str):
    # pypto.torch imports torch, so it is loaded on first use: `import pypto` alone never imports torch.
    if name == "torch":
        import importlib

        return importlib.import_module("pypto.torch")
    raise AttributeError(f"module 'pypto' has no attribute '{name}'")
