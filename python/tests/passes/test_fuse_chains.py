"""Elementwise chains (pass fuse_chains, csrc/passes/fuse_chains.cc; printed by the kernel emitter):
consecutive elementwise tile instructions of one shape run as one loop over strips of each row,
with the row sums that follow them; intermediates only the chain reads never reach their tile
buffers. The runs are FUSED ... ENDFUSED blocks in the .pto text. Results must match torch whatever the shape,
tail, broadcast, constant position or dtype, and kernels must still vectorise (test_vectorisation.py).
"""

import math
import re

import numpy as np
import pytest
import torch

import pypto
from conftest import softmax_kernel as softmax_of, streaming_rows


def fused_blocks(src: str) -> list[str]:
    """The instruction lists of the fused chains in a generated source."""
    return [line.split("// fused: ", 1)[1].strip() for line in src.splitlines() if "// fused: " in line]


def test_whole_row_softmax_is_one_chain_with_its_row_sum_and_no_local_buffer():
    x = torch.randn(64, 1024)
    compiled = pypto.compile(softmax_of(64, 1024, (4, 1024)), x)
    src = compiled.source()
    # The division writes each strip straight into the output (a returned tensor nothing reads back).
    assert fused_blocks(src) == ["trowexpandsub, texp, trowsum", "trowexpanddiv, tstore"]
    # Whole-row tiles make every inner loop run once (flatten_loops), so exp's row is handed to the
    # division directly instead of through a local buffer.
    assert "// local %" not in src
    assert "#pragma omp simd reduction" in src
    torch.testing.assert_close(compiled(x), torch.softmax(x, -1), atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("m,n,tile", [(64, 1024, (4, 1024)),   # strips of 512 in a row of 1024
                                      (37, 96, (8, 96)),       # a tail tile of rows
                                      (16, 300, (4, 300)),     # a row of 300: one strip
                                      (8, 1100, (2, 1100)),    # no strip size divides 1100: not fused
                                      (33, 100, (16, 32))])    # narrow tiles with a column tail
def test_norms_and_softmax_match_torch(m, n, tile):
    x = torch.randn(m, n)
    w, b = torch.randn(n), torch.randn(n)

    @pypto.frontend.jit
    def layer_norm(x: pypto.Tensor((m, n), pypto.DT_FP32), w: pypto.Tensor((n,), pypto.DT_FP32),
                   b: pypto.Tensor((n,), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(*tile)
        return pypto.layer_norm(x, w, b, 1e-5)

    @pypto.frontend.jit
    def rms_norm(x: pypto.Tensor((m, n), pypto.DT_FP32), w: pypto.Tensor((n,), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(*tile)
        return pypto.rms_norm(x, w, 1e-5)

    torch.testing.assert_close(softmax_of(m, n, tile)(x), torch.softmax(x, -1), atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(layer_norm(x, w, b), torch.nn.functional.layer_norm(x, (n,), w, b, 1e-5),
                               atol=1e-5, rtol=1e-4)
    ref = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5) * w
    torch.testing.assert_close(rms_norm(x, w), ref, atol=1e-5, rtol=1e-4)


def test_norm_scale_and_shift_are_read_in_the_chain_without_a_copy():
    m, n = 32, 512
    x, w, b = torch.randn(m, n), torch.randn(n), torch.randn(n)

    @pypto.frontend.jit
    def layer_norm(x: pypto.Tensor((m, n), pypto.DT_FP32), w: pypto.Tensor((n,), pypto.DT_FP32),
                   b: pypto.Tensor((n,), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(2, n)
        return pypto.layer_norm(x, w, b, 1e-5)

    src = pypto.compile(layer_norm, x, w, b).source()
    # The scale and shift loads move ahead of the normalisation chain and their reshapes are read
    # through their sources: no tile copy is left.
    assert "trowexpandmul, tcolexpandmul, tcolexpandadd, tstore" in fused_blocks(src)
    assert "pto::tcopy" not in src


@pytest.mark.parametrize("dtype", [pypto.DT_FP32, pypto.DT_FP16, pypto.DT_BF16])
def test_long_mixed_chain_with_constants_on_both_sides(dtype):
    m, n = 24, 160
    tdt = {pypto.DT_FP32: torch.float32, pypto.DT_FP16: torch.float16, pypto.DT_BF16: torch.bfloat16}[dtype]
    x = torch.randn(m, n).to(tdt)
    y = torch.rand(m, n).to(tdt) + 0.5

    @pypto.frontend.jit
    def chain(x: pypto.Tensor((m, n), dtype), y: pypto.Tensor((m, n), dtype)):
        pypto.set_vec_tile_shapes(8, n)
        a = pypto.gelu(x) + pypto.tanh(x)
        c = 2.0 - pypto.log(pypto.abs(x) + 1.0) * y
        return pypto.exp(a - c) / (1.0 + y) + pypto.rsqrt(x * x + 1.0)

    xd, yd = x.double(), y.double()
    gelu = 0.5 * xd * (1 + torch.erf(xd / math.sqrt(2)))
    ref = torch.exp(gelu + torch.tanh(xd) - (2.0 - torch.log(xd.abs() + 1) * yd)) / (1 + yd) + torch.rsqrt(xd * xd + 1)
    out = chain(x, y)
    assert out.dtype == tdt
    tol = {pypto.DT_FP32: 1e-5, pypto.DT_FP16: 2e-2, pypto.DT_BF16: 6e-2}[dtype]
    torch.testing.assert_close(out.double(), ref.to(tdt).double(), atol=tol, rtol=tol)


def test_row_and_column_broadcasts_inside_one_chain():
    m, n = 48, 256
    x, col = torch.randn(m, n), torch.randn(n)

    @pypto.frontend.jit
    def centred_scaled(x: pypto.Tensor((m, n), pypto.DT_FP32), col: pypto.Tensor((n,), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, n)
        centred = x - pypto.amax(x, -1, True)
        return pypto.exp(centred) * col + centred

    src = pypto.compile(centred_scaled, x, col).source()
    assert any("trowexpandsub" in b and "texp" in b for b in fused_blocks(src))
    centred = x - x.amax(-1, keepdim=True)
    torch.testing.assert_close(centred_scaled(x, col), torch.exp(centred) * col + centred, atol=1e-5, rtol=1e-5)


def test_numpy_inputs_and_dynamic_rows():
    @pypto.frontend.jit
    def swish_scaled(a: pypto.Tensor((pypto.DYNAMIC, 128), pypto.DT_FP32), b: pypto.Tensor((128,), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 128)
        return pypto.silu(a) * b * 0.5 + a

    b = np.random.randn(128).astype(np.float32)
    for rows in (8, 13, 100):
        a = np.random.randn(rows, 128).astype(np.float32)
        a64 = a.astype(np.float64)
        ref = a64 / (1 + np.exp(-a64)) * b * 0.5 + a64
        np.testing.assert_allclose(swish_scaled(a, b), ref, rtol=1e-5, atol=1e-6)


def test_large_outputs_are_streamed_from_the_chain():
    # An output at the streaming threshold (16 MiB with 1 MiB L2s, sixteen times this CPU's L2): the
    # fused store writes each strip with non-temporal stores.
    n = 2048
    m = streaming_rows(n)
    x = torch.randn(m, n)
    compiled = pypto.compile(softmax_of(m, n, (2, n)), x)
    src = compiled.source()
    assert "trowexpanddiv, tstore (streaming)" in fused_blocks(src)
    assert "pto::stream_fence();" in src
    torch.testing.assert_close(compiled(x), torch.softmax(x, -1), atol=1e-6, rtol=1e-5)


def test_a_store_into_a_tensor_the_kernel_reads_is_not_fused():
    # Tile-level program: the chain's result is stored into the tensor it was loaded from. Writing
    # strip by strip could be seen by later loads, so the chain ends before the store.
    from pypto.pto import ElementType, MemorySpace, PTOFunctionBuilder, PTOModule

    F32, GM = ElementType.F32, MemorySpace.GLOBAL
    mod = PTOModule("inplace")
    (PTOFunctionBuilder("k", module=mod).in_core()
        .memref("a", GM, F32)
        .tile("t", 4, 64, F32).tile("u", 4, 64, F32).tile("v", 4, 64, F32)
        .load("t", "a").muls("u", "t", 2.0).adds("v", "u", 1.0).store("v", "a").build())
    (PTOFunctionBuilder("main", module=mod).not_in_core()
        .memref("X", GM, F32)
        .call("k", {"a": ("X", 0, 0)}).build())
    prog = pypto.pto.compile(mod)
    blocks = fused_blocks(prog.source())
    assert blocks and all("tstore" not in b for b in blocks)
    x = torch.randn(4, 64)
    ref = x * 2 + 1
    prog(x)
    torch.testing.assert_close(x, ref)


def test_runs_are_fused_blocks_in_the_pto_text_and_notes_of_the_pass():
    x = torch.randn(64, 1024)
    compiled = pypto.compile(softmax_of(64, 1024, (4, 1024)), x)
    pto = compiled.pto()
    heads = re.findall(r"^ *FUSED (rows=\d+ cols=\d+ strip=\d+)", pto, re.M)
    assert heads == ["rows=4 cols=1024 strip=512"] * 2, pto
    assert pto.count("ENDFUSED") == 2
    notes = re.findall(r"note: @\w+: fused (.*) over (\d+) x (\d+) in strips of (\d+)", compiled.dump("passes"))
    assert [n[0] for n in notes] == ["trowexpandsub, texp, trowsum", "trowexpanddiv, tstore"]
    # The .pto text parses back to itself, FUSED blocks included.
    from pypto import _C
    assert _C.parse_pto_roundtrip(pto) == pto
    # Disabled, nothing is fused and the results are the same.
    pypto.set_pass_options(disable_passes=["fuse_chains"])
    try:
        plain = pypto.compile(softmax_of(64, 1024, (4, 1024)), x)
    finally:
        pypto.reset_options()
    assert "FUSED" not in plain.pto() and "// fused:" not in plain.source()
    torch.testing.assert_close(plain(x), compiled(x), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("header, message", [
    ("FUSED rows=4 strip=512", "FUSED needs cols="),
    ("FUSED rows=4 cols=1024 strip=0", "strip= must be positive"),
    ("FUSED rows=4 cols=1024 strip=512 speed=3", "expected rows=, cols=, strip=, registers=, aliases= or fast="),
    ("FUSED rows=4 cols=1024 strip=512 registers=[%nope]", "unknown tile %nope"),
])
def test_malformed_fused_headers_raise_syntax_errors(header, message):
    from pypto import _C
    pto = pypto.compile(softmax_of(64, 1024, (4, 1024)), torch.randn(64, 1024)).pto()
    first = re.search(r"^ *FUSED .*$", pto, re.M).group(0)
    bad = pto.replace(first, first[:len(first) - len(first.lstrip())] + header, 1)
    with pytest.raises(pypto.PtoSyntaxError, match=re.escape(message)):
        _C.check_pto(bad)


def test_a_loop_inside_a_fused_run_or_an_unclosed_run_is_a_syntax_error():
    from pypto import _C
    pto = pypto.compile(softmax_of(64, 1024, (4, 1024)), torch.randn(64, 1024)).pto()
    first = re.search(r"^( *)FUSED .*$", pto, re.M)
    nested = pto.replace(first.group(0), first.group(0) + "\n" + first.group(1) + "  FOR %i:idx, 0:idx, 2:idx, 1:idx", 1)
    with pytest.raises(pypto.PtoSyntaxError, match="a fused run holds instructions only"):
        _C.check_pto(nested)
    unclosed = pto.replace("ENDFUSED", "ENDFOR", 1)
    with pytest.raises(pypto.PtoSyntaxError, match="ENDFOR closes the FUSED at line"):
        _C.check_pto(unclosed)
