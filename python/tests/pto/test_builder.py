"""The tile-level API (issue 5): the seed's dynamic softmax written with
PTOFunctionBuilder, run on NumPy arrays and torch tensors; binary expansion
and adaptive tiles; the builder's checks."""

import numpy as np
import pytest
import torch

import pypto
from pypto.pto import ElementType, MemorySpace, PTOFunctionBuilder, PTOModule

F32 = ElementType.F32


def _softmax_module(rows=8, cols=8, loop_kw=None, variants=()):
    """InCore rowmax, rowexpandsub, elem_exp, rowsum, rowexpanddiv (one set per
    tile height in `variants`, named <f>_<rows>) and an orchestration loop over
    num_tiles with offset arguments, as in the seed."""
    module = PTOModule("softmax_module")

    def unary(name, op, r, out_cols):
        (PTOFunctionBuilder(name, module=module).in_core()
            .memref("input", MemorySpace.GLOBAL, F32).memref("output", MemorySpace.GLOBAL, F32)
            .tile("x", r, cols, F32).tile("y", r, out_cols, F32)
            .load("x", "input").__getattribute__(op)("y", "x").store("output", "y").build())

    def binary(name, op, r):
        (PTOFunctionBuilder(name, module=module).in_core()
            .memref("input_x", MemorySpace.GM, F32).memref("input_row", MemorySpace.GM, F32)
            .memref("output", MemorySpace.GM, F32)
            .tile("x", r, cols, F32).tile("row", r, 1, F32).tile("y", r, cols, F32)
            .load("x", "input_x").load("row", "input_row").__getattribute__(op)("y", "x", "row")
            .store("output", "y").build())

    def incore(suffix, r):
        unary("rowmax" + suffix, "rowmax", r, 1)
        binary("rowexpandsub" + suffix, "rowexpandsub", r)
        unary("elem_exp" + suffix, "exp", r, cols)
        unary("rowsum" + suffix, "rowsum", r, 1)
        binary("rowexpanddiv" + suffix, "rowexpanddiv", r)

    incore("", rows)
    for r in variants:
        incore(f"_{r}", r)
    b = (PTOFunctionBuilder("dynamic_softmax", module=module).not_in_core()
         .memref("input", MemorySpace.GLOBAL, F32).memref("output", MemorySpace.GLOBAL, F32)
         .memref("temp_max", MemorySpace.GLOBAL, F32).memref("temp_shifted", MemorySpace.GLOBAL, F32)
         .memref("temp_exp", MemorySpace.GLOBAL, F32).memref("temp_sum", MemorySpace.GLOBAL, F32)
         .scalar("num_tiles", ElementType.I32)
         .for_loop("tile_idx", 0, "num_tiles", 1, **(loop_kw or {}))
         .call("rowmax", {"input": ("input", "tile_idx", 0), "output": ("temp_max", "tile_idx", 0)})
         .call("rowexpandsub", {"input_x": ("input", "tile_idx", 0), "input_row": ("temp_max", "tile_idx", 0),
                                "output": ("temp_shifted", "tile_idx", 0)})
         .call("elem_exp", {"input": ("temp_shifted", "tile_idx", 0), "output": ("temp_exp", "tile_idx", 0)})
         .call("rowsum", {"input": ("temp_exp", "tile_idx", 0), "output": ("temp_sum", "tile_idx", 0)})
         .call("rowexpanddiv", {"input_x": ("temp_exp", "tile_idx", 0), "input_row": ("temp_sum", "tile_idx", 0),
                                "output": ("output", "tile_idx", 0)})
         .end_for())
    b.build()
    return module


def _buffers(n_rows, cols, lib):
    x = lib.randn(n_rows, cols) if lib is torch else np.random.default_rng(n_rows).standard_normal(
        (n_rows, cols)).astype(np.float32)
    z = (lambda *s: torch.zeros(*s)) if lib is torch else (lambda *s: np.zeros(s, np.float32))
    return x, z(n_rows, cols), z(n_rows, 1), z(n_rows, cols), z(n_rows, cols), z(n_rows, 1)


@pytest.fixture(scope="module")
def softmax_program():
    return pypto.pto.compile(_softmax_module())


@pytest.mark.parametrize("num_tiles", [1, 3, 8, 13])
@pytest.mark.parametrize("lib", [torch, np])
def test_seed_dynamic_softmax_matches_torch(softmax_program, num_tiles, lib):
    args = _buffers(num_tiles * 8, 8, lib)
    softmax_program(*args, num_tiles)
    x, out = torch.as_tensor(args[0]), torch.as_tensor(args[1])
    torch.testing.assert_close(out, torch.softmax(x, -1), atol=1e-5, rtol=1e-5)
    assert softmax_program.stats()["tasks"] == 5 * num_tiles


def test_parameters_are_memrefs_then_scalars_and_accept_keywords(softmax_program):
    assert softmax_program.parameters == ["input", "output", "temp_max", "temp_shifted", "temp_exp", "temp_sum",
                                          "num_tiles"]
    x, out, tm, ts, te, tsum = _buffers(16, 8, torch)
    softmax_program(input=x, output=out, temp_max=tm, temp_shifted=ts, temp_exp=te, temp_sum=tsum, num_tiles=2)
    torch.testing.assert_close(out, torch.softmax(x, -1), atol=1e-5, rtol=1e-5)


def test_orchestration_calls_become_tasks_and_the_pto_text_shows_offsets(softmax_program):
    text = softmax_program.pto()
    assert "orchestration func @" in text and text.count("incore func @") == 5
    assert "CALL @rowmax(%input -> %input[(tile_idx * 8), 0; 8, 8], %output -> %temp_max[(tile_idx * 8), 0; 8, 1])" in text
    assert "%num_tiles = alloc_scalar : i32" in text
    assert softmax_program.count_tasks(*_buffers(24, 8, torch), 3) == 15


def test_a_region_outside_the_arrays_is_a_clear_error(softmax_program):
    args = _buffers(16, 8, torch)
    with pytest.raises(ValueError, match=r"CALL @rowmax argument %input -> %input: dim 0 of the region is \[16, 24\), "
                                         r"outside the tensor's extent 16"):
        softmax_program(*args, 3)


def test_wrong_arguments_are_clear_errors(softmax_program):
    args = _buffers(16, 8, torch)
    with pytest.raises(TypeError, match=r"missing argument\(s\): num_tiles"):
        softmax_program(*args)
    with pytest.raises(TypeError, match=r"parameter 'input' expects dtype DT_FP32, found DT_DOUBLE \(torch.float64\)"):
        softmax_program(args[0].double(), *args[1:], 2)
    with pytest.raises(ValueError, match=r"parameter 'temp_max' expects shape \(temp_max_d0, temp_max_d1\), found \(16,\)"):
        softmax_program(*args[:2], torch.zeros(16), *args[3:], 2)


def test_binary_expansion_runs_blocks_and_a_residual():
    prog = pypto.pto.compile(_softmax_module(loop_kw={"max_range": 4096, "min_range": 256}))
    args = _buffers(300 * 8, 8, torch)
    assert prog.count_tasks(*args, 300) == 5 * 300
    prog(*args, 300)
    torch.testing.assert_close(args[1], torch.softmax(args[0], -1), atol=1e-5, rtol=1e-5)
    assert "max_range=4096 min_range=256" in prog.pto()


def test_adaptive_tiles_use_the_variants_and_halve_the_tasks():
    levels = {4096: 16, 2048: 16, 1024: 16, 512: 16, 256: 16, 0: 8}
    prog = pypto.pto.compile(_softmax_module(loop_kw={"max_range": 4096, "min_range": 256, "tile_levels": levels},
                                             variants=(16,)))
    for n in (256, 300, 100):
        args = _buffers(n * 8, 8, torch)
        blocks = n - n % 256
        assert prog.count_tasks(*args, n) == 5 * (blocks // 2 + n % 256)
        prog(*args, n)
        torch.testing.assert_close(args[1], torch.softmax(args[0], -1), atol=1e-5, rtol=1e-5)


def test_incore_calls_inside_incore_functions_are_inlined():
    m = PTOModule("inline")
    (PTOFunctionBuilder("scale", module=m).in_core()
        .memref("src", MemorySpace.GLOBAL, F32).memref("dst", MemorySpace.GLOBAL, F32).scalar("unused")
        .tile("t", 4, 8, F32).tile("u", 4, 8, F32)
        .load("t", "src").muls("u", "t", 2.0).store("u", "dst").build())
    (PTOFunctionBuilder("two_halves", module=m).in_core()
        .memref("a", MemorySpace.GLOBAL, F32).memref("b", MemorySpace.GLOBAL, F32)
        .call("scale", {"src": ("a", 0, 0), "dst": ("b", 0, 0), "unused": 0})
        .call("scale", {"src": ("a", 1, 0), "dst": ("b", 1, 0), "unused": 0})
        .build())
    prog = pypto.pto.compile(m, entry="two_halves")
    a, b = torch.randn(8, 8), torch.zeros(8, 8)
    prog(a, b)
    torch.testing.assert_close(b, a * 2)
    assert prog.pto().count("incore func @") == 1  # scale was inlined twice
    assert prog.stats()["tasks"] == 1


def test_matmul_and_accumulate_over_k():
    m = PTOModule("mm")
    (PTOFunctionBuilder("mm_tile", module=m).in_core()
        .memref("a", MemorySpace.GLOBAL, F32).memref("b", MemorySpace.GLOBAL, F32)
        .memref("c", MemorySpace.GLOBAL, F32)
        .tile("x", 16, 8, F32).tile("y", 8, 16, F32).tile("acc", 16, 16, F32)
        .load("x", "a", 0, 0).load("y", "b", 0, 0).matmul("acc", "x", "y")
        .for_loop("k", 1, 4, 1)
        .load("x", "a", 0, "k").load("y", "b", "k", 0).matmul_acc("acc", "x", "y")
        .end_for()
        .store("acc", "c").build())
    (PTOFunctionBuilder("main", module=m).not_in_core()
        .memref("A", MemorySpace.GLOBAL, F32).memref("B", MemorySpace.GLOBAL, F32)
        .memref("C", MemorySpace.GLOBAL, F32).scalar("mt").scalar("nt")
        .for_loop("i", 0, "mt").for_loop("j", 0, "nt")
        .call("mm_tile", {"a": ("A", "i", 0), "b": ("B", 0, "j"), "c": ("C", "i", "j")})
        .end_for().end_for().build())
    prog = pypto.pto.compile(m)
    A, B, C = torch.randn(48, 32), torch.randn(32, 64), torch.zeros(48, 64)
    prog(A, B, C, 3, 4)
    torch.testing.assert_close(C, A @ B, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("l0", [None, (8, 8, 16), (4, 2, 8), (16, 8, 16)])
def test_matmul_l0_blocks_give_the_same_product(l0):
    m = PTOModule("mm_l0")
    (PTOFunctionBuilder("mm_tile", module=m).in_core()
        .memref("a", MemorySpace.GLOBAL, F32).memref("b", MemorySpace.GLOBAL, F32)
        .memref("c", MemorySpace.GLOBAL, F32)
        .tile("x", 16, 8, F32).tile("y", 8, 16, F32).tile("acc", 16, 16, F32)
        .load("x", "a", 0, 0).load("y", "b", 0, 0).matmul("acc", "x", "y", l0=l0)
        .load("x", "a", 0, 1).load("y", "b", 1, 0).matmul_acc("acc", "x", "y", l0=l0)
        .store("acc", "c").build())
    (PTOFunctionBuilder("main", module=m).not_in_core()
        .memref("A", MemorySpace.GLOBAL, F32).memref("B", MemorySpace.GLOBAL, F32)
        .memref("C", MemorySpace.GLOBAL, F32)
        .call("mm_tile", {"a": ("A", 0, 0), "b": ("B", 0, 0), "c": ("C", 0, 0)}).build())
    prog = pypto.pto.compile(m)
    if l0 is not None:
        assert f"l0 [{l0[0]}, {l0[1]}, {l0[2]}]" in prog.pto()
    A, B, C = np.random.rand(16, 16).astype(np.float32), np.random.rand(16, 16).astype(np.float32), np.zeros((16, 16), np.float32)
    prog(A, B, C)
    np.testing.assert_allclose(C, A @ B, rtol=1e-5, atol=1e-5)


def test_matmul_l0_that_does_not_divide_the_tile_is_a_verify_error():
    m = PTOModule("mm_bad")
    (PTOFunctionBuilder("k", module=m).in_core()
        .memref("a", MemorySpace.GLOBAL, F32).memref("b", MemorySpace.GLOBAL, F32).memref("c", MemorySpace.GLOBAL, F32)
        .tile("x", 16, 8, F32).tile("y", 8, 16, F32).tile("z", 16, 16, F32)
        .load("x", "a", 0, 0).load("y", "b", 0, 0).matmul("z", "x", "y", l0=(6, 8, 16)).store("z", "c").build())
    (PTOFunctionBuilder("main", module=m).not_in_core()
        .memref("A", MemorySpace.GLOBAL, F32).memref("B", MemorySpace.GLOBAL, F32).memref("C", MemorySpace.GLOBAL, F32)
        .call("k", {"a": ("A", 0, 0), "b": ("B", 0, 0), "c": ("C", 0, 0)}).build())
    with pytest.raises(pypto.VerifyError, match=r"l0 \[6, 8, 16\] must give 3 positive sizes dividing the tile's m, k, n \(16, 8, 16\)"):
        pypto.pto.compile(m)


@pytest.mark.parametrize("build, message", [
    (lambda b: b.tile("x", 8, 8).tile("y", 8, 8).tile("z", 8, 8).matmul("z", "x", "y", l0=(8, 8)),
     r"l0 must be 3 positive ints \(m, k, n\), found \(8, 8\)"),
    (lambda b: b.tile("x", 8, 8).tile("y", 8, 8).tile("z", 8, 8).matmul("z", "x", "y", l0=(8, 0, 8)), "l0 must be 3 positive ints"),
    (lambda b: b.tile("x", 8, 8).tile("y", 8, 8).instr("tadd", "y", "x", "x", l0=(8, 8, 8)), "l0 applies to tmatmul"),
    (lambda b: b.tile("x", 8, 8).tile("x", 8, 8), "'x' is already declared"),
    (lambda b: b.load("nope", "m"), "'nope' is not a declared tile"),
    (lambda b: b.tile("x", 8, 8).tile("y", 8, 4).exp("y", "x"), r"'x' has shape \(8, 8\), expected \(8, 4\)"),
    (lambda b: b.tile("x", 8, 8).tile("r", 8, 8).rowsum("r", "x"), r"'r' must have shape \(8, 1\)"),
    (lambda b: b.tile("x", 8, 4).tile("y", 8, 8).tile("z", 8, 8).matmul("z", "x", "y"), "shapes do not chain"),
    (lambda b: b.for_loop("i", 0, 4).build(), "for_loop is still open"),
    (lambda b: b.end_for(), "no open for_loop"),
    (lambda b: b.for_loop("i", 0, "n // 2.5"), "only \\+ - \\* // % are allowed|not an integer expression"),
    (lambda b: b.for_loop("i", 0, 8, max_range=64, min_range=8), "orchestration loops only"),
    (lambda b: b.scalar_li("s", 1).scalar_li("s", 2), "single-assignment"),
    (lambda b: b.tile("x", 8, 8).instr("tnosuchop", "x", "x"), r"@k: unknown instruction 'tnosuchop'"),
    (lambda b: b.tile("x", 8).arange("x", "n", 1), "arange start: expected a number, found 'n'"),
])
def test_builder_errors_name_the_function_and_the_problem(build, message):
    b = PTOFunctionBuilder("k").in_core().memref("m", MemorySpace.GLOBAL, F32)
    with pytest.raises((ValueError, TypeError, NotImplementedError), match=message):
        build(b)


def test_tile_instructions_in_an_orchestration_function_are_rejected():
    b = PTOFunctionBuilder("o").not_in_core().memref("m", MemorySpace.GLOBAL, F32).tile("x", 8, 8)
    with pytest.raises(ValueError, match="tile instructions belong in InCore functions"):
        b.exp("x", "x")


def test_if_inside_an_incore_function_branches_on_a_scalar():
    m = PTOModule("branch")
    (PTOFunctionBuilder("scale_or_negate", module=m).in_core()
        .memref("a", MemorySpace.GLOBAL, F32).memref("b", MemorySpace.GLOBAL, F32).scalar("mode")
        .tile("t", 8, 8, F32).tile("u", 8, 8, F32)
        .load("t", "a")
        .if_then("mode > 0").muls("u", "t", 3.0).else_().neg("u", "t").end_if()
        .store("u", "b").build())
    (PTOFunctionBuilder("main", module=m).not_in_core()
        .memref("x", MemorySpace.GLOBAL, F32).memref("y", MemorySpace.GLOBAL, F32).scalar("n")
        .for_loop("i", 0, "n")
        .call("scale_or_negate", {"a": ("x", "i", 0), "b": ("y", "i", 0), "mode": "i % 2"})
        .end_for().build())
    prog = pypto.pto.compile(m)
    assert "IF (mode < 0)" not in prog.pto() and "IF (0 < mode)" in prog.pto()
    x, y = torch.randn(32, 8), torch.zeros(32, 8)
    prog(x, y, 4)
    want = torch.cat([-x[0:8], x[8:16] * 3, -x[16:24], x[24:32] * 3])
    torch.testing.assert_close(y, want)


def test_call_to_an_undefined_function_is_an_error():
    m = PTOModule("bad")
    (PTOFunctionBuilder("main", module=m).not_in_core().memref("x", MemorySpace.GLOBAL, F32)
        .call("nowhere", {"x": "x"}).build())
    with pytest.raises(ValueError, match="CALL @nowhere names no function of module 'bad'"):
        pypto.pto.compile(m)


def test_gm_and_global_are_one_memory_space_and_store_takes_either_order():
    assert MemorySpace.GM is MemorySpace.GLOBAL
    m = PTOModule("orders")
    (PTOFunctionBuilder("copy", module=m).in_core()
        .memref("a", MemorySpace.GM, F32).memref("b", MemorySpace.GLOBAL, F32).tile("t", 8, 8, F32)
        .load("t", "a").store("b", "t").build())  # the seed's .store(memref, tile)
    prog = pypto.pto.compile(m, entry="copy")
    a, b = np.arange(64, dtype=np.float32).reshape(8, 8), np.zeros((8, 8), np.float32)
    prog(a, b)
    np.testing.assert_array_equal(a, b)
