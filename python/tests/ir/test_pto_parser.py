"""The .pto parser through the binding: the .pto text of compiled kernels
parses and prints back unchanged, and malformed text raises
pypto.PtoSyntaxError with its line and column."""

import re

import numpy as np
import pytest

import pypto
import pypto.pto
from pypto import _C


def _pto(fn, *args) -> str:
    return pypto.compile(pypto.jit(fn), *args).pto()


def softmax_fn(x: pypto.Tensor((64, 200), pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(32, 64)
    return pypto.softmax(x, -1)


def layer_norm_fn(x: pypto.Tensor((40, 96), pypto.DT_FP32), w: pypto.Tensor((96,), pypto.DT_FP32),
                  b: pypto.Tensor((96,), pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(8, 32)
    return pypto.layer_norm(x, w, b)


def matmul_fn(a: pypto.Tensor((100, 72), pypto.DT_FP32), b: pypto.Tensor((72, 40), pypto.DT_FP32)):
    pypto.set_cube_tile_shapes([16, 32], [32, 64], [16, 32])
    pypto.set_vec_tile_shapes(16, 32)
    return pypto.relu(pypto.matmul(a, b) + 1.0)


M = pypto.frontend.dynamic("M")


def dynamic_fn(x: pypto.Tensor([M, 48], pypto.DT_FP32), y: pypto.Tensor([M, 48], pypto.DT_FP32),
               z: pypto.Tensor([pypto.DYNAMIC, 16], pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(16, 16)
    return pypto.exp(x) * y - 0.5, pypto.softmax(z, -1)


def views_fn(x: pypto.Tensor((12, 40), pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(4, 16)
    a = x[2:10, 5:37] * 2
    b = x[::3, 1:2] + 0
    c = pypto.transpose(x, 0, 1) + 1
    d = pypto.reshape(x, (24, 20)) * 3
    e = x[:, 1:] - 1
    return a, b, c, d, e


def conv_fn(x: pypto.Tensor((2, 3, 9, 8), pypto.DT_FP32), w: pypto.Tensor((4, 3, 3, 3), pypto.DT_FP32)):
    # stride 1: an implicit GEMM, whose matmul reads the input rows of a tap, [1, 3, rows, 7], as [3, rows * 7]
    return pypto.conv(x, w, pypto.DT_FP32, [1, 1], [1, 1, 0, 1], [1, 1])


def strided_conv_fn(x: pypto.Tensor((2, 3, 9, 8), pypto.DT_FP32), w: pypto.Tensor((4, 3, 3, 3), pypto.DT_FP32)):
    # its im2col tensor is written whole by the taps' copies: an uninitialised workspace
    return pypto.conv(x, w, pypto.DT_FP32, [2, 1], [1, 1, 0, 1], [1, 1])


def loop_fn(x: pypto.Tensor([pypto.DYNAMIC, 32], pypto.DT_FP32), out: pypto.Tensor([pypto.DYNAMIC, 32], pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(8, 32)
    rows = x.shape[0]
    for i in pypto.loop(0, pypto.ceildiv(rows, 8), 1, idx_name="blk"):
        valid = (rows - i * 8).min(8)
        xb = pypto.view(x, [8, 32], [i * 8, 0], valid_shape=[valid, 32])
        pypto.assemble(pypto.rms_norm(xb), [i * 8, 0], out)


def branch_fn(x: pypto.Tensor((4, 3, 16), pypto.DT_FP32), out: pypto.Tensor((4, 3, 16), pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(1, 1, 16)
    for i in pypto.loop(4):
        for j in pypto.loop(3):
            v = x[i:i + 1, j:j + 1, :]
            if i == 0:
                out[i:i + 1, j:j + 1, :] = v * 10
            else:
                out[i:i + 1, j:j + 1, :] = pypto.exp(v)


def random_fn(x: pypto.Tensor([M, 24], pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(4, 8)
    u = pypto.uniform([x.shape[0], 24], [2 ** 64 - 1], [0, 12345678901234567], [1], pypto.DT_BF16)
    return x * pypto.cast(u, pypto.DT_FP32) + pypto.normal([x.shape[0], 24], [7], [0, 3], [3], pypto.DT_FP32)


def atomic_fn(x: pypto.Tensor([pypto.DYNAMIC, 16], pypto.DT_FP32), out: pypto.Tensor((4, 16), pypto.DT_FP32)):
    # an accumulator parameter (accum) and atomic stores (tstore ... atomic_add)
    pypto.set_vec_tile_shapes(4, 8)
    for i in pypto.loop(x.shape[0] // 4):
        pypto.atomic_add(pypto.view(x, [4, 16], [i * 4, 0]), [0, 0], out)


KERNELS = {
    "softmax": (softmax_fn, lambda: (np.zeros((64, 200), np.float32),)),
    "layer_norm": (layer_norm_fn, lambda: (np.zeros((40, 96), np.float32), np.ones(96, np.float32),
                                           np.zeros(96, np.float32))),
    "matmul": (matmul_fn, lambda: (np.zeros((100, 72), np.float32), np.zeros((72, 40), np.float32))),
    "dynamic": (dynamic_fn, lambda: (np.zeros((37, 48), np.float32), np.zeros((37, 48), np.float32),
                                     np.zeros((21, 16), np.float32))),
    "views": (views_fn, lambda: (np.zeros((12, 40), np.float32),)),
    "conv": (conv_fn, lambda: (np.zeros((2, 3, 9, 8), np.float32), np.zeros((4, 3, 3, 3), np.float32))),
    "strided_conv": (strided_conv_fn, lambda: (np.zeros((2, 3, 9, 8), np.float32), np.zeros((4, 3, 3, 3), np.float32))),
    "loop": (loop_fn, lambda: (np.zeros((13, 32), np.float32), np.zeros((13, 32), np.float32))),
    "branch": (branch_fn, lambda: (np.zeros((4, 3, 16), np.float32), np.zeros((4, 3, 16), np.float32))),
    "random": (random_fn, lambda: (np.zeros((13, 24), np.float32),)),
    "atomic": (atomic_fn, lambda: (np.zeros((12, 16), np.float32), np.zeros((4, 16), np.float32))),
}


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_compiled_kernels_round_trip(name):
    fn, args = KERNELS[name]
    text = _pto(fn, *args())
    assert _C.parse_pto_roundtrip(text) == text
    assert _C.check_pto(text) is None


def test_dynamic_dims_are_parenthesized_and_views_declared():
    text = _pto(dynamic_fn, *KERNELS["dynamic"][1]())
    assert "%x: !pto.memref<gm,(M)x48,f32>" in text
    assert "%z: !pto.memref<gm,(z_0)x16,f32>" in text
    views = _pto(views_fn, *KERNELS["views"][1]())
    assert " = view %x[2, 5] dims [0, 1] steps [1, 1] : !pto.memref<gm,8x32,f32>" in views
    assert " = view %x[0, 1] dims [0, 1] steps [3, 1] : !pto.memref<gm,4x1,f32>" in views
    assert " = reshape %x : !pto.memref<gm,24x20,f32>" in views
    loop = _pto(loop_fn, *KERNELS["loop"][1]())
    assert "FOR %blk:idx" in loop
    conv = _pto(strided_conv_fn, *KERNELS["strided_conv"][1]())
    assert " = alloc_workspace uninit : !pto.memref<gm,2x27x5x7,f32>" in conv  # the im2col tensor
    conv = _pto(conv_fn, *KERNELS["conv"][1]())
    assert "x27x" not in conv  # no im2col tensor
    assert re.search(r"tmatmul_acc %t\d+, %t\d+, %t\d+ : !pto.tile<4x63xf32>", conv), conv
    assert re.search(r"tload %\w+\[.*\] valid \[1, 3, .*, 7\] view : !pto.tile<1x3x9x7xf32>", conv), conv


SMALL = """\
module @m entry @main

incore func @k(%a: !pto.memref<gm,8x8,f32>, %o: !pto.memref<gm,8x8,f32> out, %g0: index) buffer_bytes=256 {
  %t0 = alloc_tile : !pto.tile<8x8xf32>
  %t1 = alloc_tile : !pto.tile<8x8xf32>
  %t0 = tload %a[0, 0] valid [8, 8] : !pto.tile<8x8xf32>
  %t1 = tadds %t0, 1 : !pto.tile<8x8xf32>
  tstore %t1, %o[0, 0] valid [8, 8]
  return
}

orchestration func @main(%x: !pto.memref<gm,16x8,f32>, %y: !pto.memref<gm,16x8,f32> out) {
  FOR %g0:idx, 0:idx, 2:idx, 1:idx parallel dim=0 tile=8
    CALL @k(%a -> %x[(g0 * 8), 0; 8, 8], %o -> %y[(g0 * 8), 0; 8, 8], %g0 -> g0)
  ENDFOR
  return
}
"""


def test_small_program_round_trips():
    assert _C.parse_pto_roundtrip(SMALL) == SMALL


def test_the_older_comment_form_reads_as_the_same_program():
    old = (SMALL.replace("module @m entry @main\n", "// PTO Module: m\n// Entry: @main\n")
           .replace("incore func @k(", "// Function Type: InCore\n// Buffer bytes: 256\nfunc @k(")
           .replace(") buffer_bytes=256 {", ") {")
           .replace("orchestration func @main(", "// Function Type: Orchestration\nfunc @main(")
           .replace(" parallel dim=0 tile=8", "  // parallel dim=0 tile=8"))
    assert "buffer_bytes" not in old and "orchestration func" not in old
    assert _C.parse_pto_roundtrip(old) == SMALL


def test_seed_forms_are_accepted():
    seed = """\
// Function Type: InCore
func @rowmax(%input: !pto.memref<gm,8x8xf32>, %output: !pto.memref<gm,8x1xf32> out) {
  %x = tload %input[0, 0] : (!pto.memref) -> !pto.tile<8x8xf32>
  %result = trowmax %x : !pto.tile<8x8xf32> -> !pto.tile<8x1xf32>
  tstore %result, %output[0, 0]
  return
}

// Function Type: Orchestration
func @main(%input: !pto.memref<gm,8x8,f32>, %output: !pto.memref<gm,8x1,f32> out, %n: index) {
  %temp_max = alloc_workspace : !pto.memref<gm,8x1,f32>
  FOR %i:idx, 0:idx, %n:idx, 1:idx
    CALL @rowmax(%input -> %input, %output -> %temp_max)
  ENDFOR
  return
}
"""
    text = _C.parse_pto_roundtrip(seed)
    assert "  %x = alloc_tile : !pto.tile<8x8xf32>\n" in text
    assert "CALL @rowmax(%input -> %input[0, 0; 8, 8], %output -> %temp_max[0, 0; 8, 1])" in text
    assert _C.parse_pto_roundtrip(text) == text


# (replaced text, replacement with '$' at the expected error position, part of the message)
BAD = [
    ("tadds %t0, 1", "$tfoo %t0, 1", "unknown instruction 'tfoo'"),
    ("tadds %t0, 1", "tadds $%t7, 1", "unknown tile %t7"),
    ("tload %a[0, 0]", "tload $%b[0, 0]", "unknown memref %b"),
    ("  ENDFOR\n  return", "  $return", "expected ENDFOR for the FOR at line 13"),
    ("!pto.tile<8x8xf32>\n  %t1", "!pto.tile<8x8x$f31>\n  %t1", "unknown dtype 'f31'"),
    ("tadds %t0, 1", "tadds %t0, $1e999", "out of range"),
    ("tadds %t0, 1", "tadds %t0, $1.2.3", "malformed number"),
    ("%x[(g0 * 8), 0;", "%x[(g0 * 8$, 0;", "expected ')'"),
    ("  %t1 = alloc_tile", "  $%t0 = alloc_tile", "tile %t0 is declared twice"),
    ("CALL @k(", "CALL $@q(", "call to unknown function @q"),
    (", %g0 -> g0)", "$)", "@k takes 3 arguments, 2 given"),
    ("func @main(", "func $@other(", "not the entry @main"),
    # Names read as they are stored: no bidirectional override, C1 control or invisible character.
    ("  %t1 = alloc_tile", "  %t1$\u202e = alloc_tile", "may not hold the control or bidirectional formatting "
                                                        "character U+202E"),
    ("  %t1 = alloc_tile", "  %t1$\u0085 = alloc_tile", "character U+0085"),
    ("  %t1 = alloc_tile", "  %t1$\u200b = alloc_tile", "character U+200B"),
    ("%x: !pto.memref<gm,16x8", "%x: !pto.memref<gm,$-1x8", "a memref dim cannot be negative, found -1"),
    ("%x: !pto.memref<gm,16x8", "%x: !pto.memref<gm,16x$(2 - 3)", "a memref dim cannot be negative, found -1"),
    ("%a: !pto.memref<gm,8x8", "%a: $!pto.memref<gm,0x8", "dim 0 of parameter %a must be positive, found 0"),
    # An expression names a scalar of its own function or the variable of a FOR around it.
    ("tload %a[0, 0] valid [8, 8]", "tload %a[0, 0] valid [8, $n]",
     "'n' is not a scalar or loop variable in scope here (@k sees only its index parameters"),
    ("tadds %t0, 1", "tadds %t0, $t1", "'t1' is a tile, not a scalar"),
    ("tadds %t0, 1", "tadds %t0, $a", "'a' is a memref, not a scalar"),
    ("%o -> %y[(g0 * 8), 0; 8, 8]", "%o -> %y[($i * 8), 0; 8, 8]", "'i' is not a scalar or loop variable in scope"),
    ("  ENDFOR\n  return", "  ENDFOR\n  CALL @k(%a -> %x[0, 0; 8, 8], %o -> %y[0, 0; 8, 8], %g0 -> $g0)\n  return",
     "'g0' is not a scalar or loop variable in scope here (the orchestration's scalars"),
    ("FOR %g0:idx, 0:idx, 2:idx", "FOR %g0:idx, 0:idx, $g0:idx", "'g0' is not a scalar or loop variable"),
]


def _marked(replace_from, marked_to):
    at = marked_to.index("$")
    text = SMALL.replace(replace_from, marked_to.replace("$", ""), 1)
    prefix = SMALL[:SMALL.index(replace_from)] + marked_to[:at]
    line = prefix.count("\n") + 1
    column = len(prefix) - (prefix.rfind("\n") + 1) + 1
    return text, line, column


@pytest.mark.parametrize("replace_from,marked_to,message", BAD)
def test_malformed_text_raises_with_position(replace_from, marked_to, message):
    text, line, column = _marked(replace_from, marked_to)
    with pytest.raises(pypto.PtoSyntaxError) as info:
        _C.check_pto(text)
    err = info.value
    assert isinstance(err, SyntaxError)
    assert (err.line, err.column) == (line, column), str(err)
    assert message in str(err)
    with pytest.raises(pypto.PtoSyntaxError):
        _C.parse_pto_roundtrip(text)


def test_a_scalar_declared_later_or_a_loop_variable_after_its_loop_is_out_of_scope():
    # A workspace dim may not name a FOR variable; an InCore body may not use a variable of a FOR
    # that has ended. Both used to pass the verifier and fail in the host compiler.
    text = SMALL.replace("  FOR %g0", "  %w = alloc_workspace : !pto.memref<gm,8x(g0),f32>\n  FOR %g0")
    with pytest.raises(pypto.PtoSyntaxError, match="'g0' is not a scalar or loop variable in scope") as info:
        _C.check_pto(text)
    assert (info.value.line, info.value.column) == (13, 44)
    text = SMALL.replace("  %t1 = tadds %t0, 1", "  FOR %j:idx, 0:idx, 2:idx, 1:idx\n  ENDFOR\n  %t1 = tadds %t0, j")
    with pytest.raises(pypto.PtoSyntaxError, match="'j' is not a scalar or loop variable in scope") as info:
        _C.check_pto(text)
    assert (info.value.line, info.value.column) == (9, 20)
    # Inside the loop the variable is in scope, and the program runs.
    text = SMALL.replace("  %t1 = tadds %t0, 1\n", "  FOR %j:idx, 0:idx, 2:idx, 1:idx\n  %t1 = tadds %t0, j\n  ENDFOR\n")
    x = np.arange(128, dtype=np.float32).reshape(16, 8)
    y = np.zeros_like(x)
    pypto.pto.compile(text)(x, y)
    np.testing.assert_array_equal(y, x + 1)


def test_empty_and_garbage_text():
    with pytest.raises(pypto.PtoSyntaxError) as info:
        _C.check_pto("")
    assert (info.value.line, info.value.column) == (1, 1)
    with pytest.raises(pypto.PtoSyntaxError) as info:
        _C.check_pto("\n\n  @@@")
    assert (info.value.line, info.value.column) == (3, 3)


def test_names_may_hold_other_non_ascii_letters():
    text = SMALL.replace("%t1", "%t\u00e91").replace("@k(", "@k\u03bb(").replace("@k ", "@k\u03bb ")
    assert "%t\u00e91" in text
    assert _C.parse_pto_roundtrip(text) == text


def test_a_lone_surrogate_is_a_positioned_syntax_error_not_a_binding_error():
    text = SMALL.replace("%t1 = alloc_tile", "%t\ud8001 = alloc_tile")
    for call in (pypto.pto.parse, pypto.pto.compile):
        with pytest.raises(pypto.PtoSyntaxError) as info:
            call(text)
        assert (info.value.line, info.value.column) == (5, 5)
        assert "U+D800 is a lone surrogate" in str(info.value)
    assert "incompatible function arguments" not in str(info.value)


VIEWED = """\
// Function Type: InCore
func @k(%a: !pto.memref<gm,8x8,f32>, %o: !pto.memref<gm,8x8,f32> out) {
  %t0 = alloc_tile : !pto.tile<8x8xf32>
  %t0 = tload %a[0, 0] valid [8, 8] : !pto.tile<8x8xf32>
  tstore %t0, %o[0, 0] valid [8, 8]
  return
}

// Function Type: Orchestration
func @main(%x: !pto.memref<gm,16x8,f32>, %y: !pto.memref<gm,16x8,f32> out) {
  %n = alloc_scalar : i64
  %v = view %x[(i * 8), 0] dims [0, 1] steps [1, 1] : !pto.memref<gm,8x8,f32>
  FOR %i:idx, 0:idx, 2:idx, 1:idx
    CALL @k(%a -> %v[0, 0; 8, 8], %o -> %y[(i * 8), 0; 8, 8])
  ENDFOR
  return
}
"""


@pytest.mark.parametrize("old, new, message", [
    ("view %x[(i * 8), 0]", "view %x[y, 0]", "view %v uses 'y', which is a memref, not a scalar or loop variable"),
    ("!pto.memref<gm,8x8,f32>\n  FOR", "!pto.memref<gm,(p)x(q),f32>\n  FOR", "view %v uses 'p', which is not a "
                                                                          "scalar or loop variable"),
])
def test_view_expressions_name_only_scalars_and_loop_variables(old, new, message):
    # These used to pass the verifier and fail in the host compiler.
    x = np.arange(128, dtype=np.float32).reshape(16, 8)
    y = np.zeros_like(x)
    pypto.pto.compile(VIEWED)(x, y, 0)
    np.testing.assert_array_equal(y, x)
    with pytest.raises(pypto.PtoSyntaxError) as info:
        pypto.pto.compile(VIEWED.replace(old, new))
    assert (info.value.line, info.value.column) == (12, 13)
    assert message in str(info.value)
