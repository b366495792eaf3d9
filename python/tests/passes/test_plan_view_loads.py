"""Loads that view their source (pass plan_view_loads, csrc/passes/plan_view_loads.cc; the kernel
calls pto::tload_view): a tile that is only loaded and read points into the source when the source
holds it densely, and is copied otherwise. The decision is the `view` attribute of the tload in the
.pto text. Results must not depend on which happens."""

import re

import numpy as np
import pytest
import torch

import pypto
from conftest import softmax_kernel as softmax_of
import pypto.pto
from pypto.pto import ElementType, MemorySpace, PTOFunctionBuilder, PTOModule

F32 = ElementType.F32
GM = MemorySpace.GLOBAL


def test_read_only_loads_of_the_input_become_views():
    x = torch.randn(64, 256)
    src = pypto.compile(softmax_of(64, 256, (16, 256)), x).source()
    assert "pto::tload_view<float, 256>" in src
    assert src.count("= pto::tload_view<") >= 2  # both reads of x


@pytest.mark.parametrize("m,n,tile", [(64, 256, (16, 256)),   # dense whole-row tiles: views
                                      (50, 256, (16, 256)),   # a tail tile: copied
                                      (64, 200, (16, 64))])   # tiles narrower than a row: copied
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "padded rows"])
def test_results_match_torch_for_dense_and_strided_inputs(m, n, tile, layout):
    base = torch.randn(m, n)
    if layout == "transposed":
        x = base.t().contiguous().t()        # column-major storage
    elif layout == "padded rows":
        x = torch.randn(m, n + 8)[:, :n]     # row stride larger than the row
    else:
        x = base
    y = softmax_of(m, n, tile)(x)
    torch.testing.assert_close(y, torch.softmax(x, -1), atol=1e-6, rtol=1e-5)
    assert torch.equal(x, x.clone())  # the input is left as it was


def test_a_tile_read_after_a_store_is_copied_even_when_the_memory_aliases():
    # t is loaded from `a`, then `b` is stored, then t is read again. When a and b are one tensor, a view
    # of `a` would see the stored values; the load must copy.
    m = PTOModule("alias")
    (PTOFunctionBuilder("k", module=m).in_core()
        .memref("a", GM, F32).memref("b", GM, F32).memref("c", GM, F32)
        .tile("t", 4, 8, F32).tile("u", 4, 8, F32).tile("v", 4, 8, F32)
        .load("t", "a").muls("u", "t", 2.0).store("u", "b").add("v", "t", "u").store("v", "c").build())
    (PTOFunctionBuilder("main", module=m).not_in_core()
        .memref("X", GM, F32).memref("Y", GM, F32)
        .call("k", {"a": ("X", 0, 0), "b": ("X", 0, 0), "c": ("Y", 0, 0)}).build())
    prog = pypto.pto.compile(m)
    assert "= pto::tload_view<" not in prog.source()
    x = torch.randn(4, 8)
    orig = x.clone()
    y = torch.zeros(4, 8)
    prog(x, y)
    torch.testing.assert_close(x, orig * 2)
    torch.testing.assert_close(y, orig * 3)


def test_numpy_inputs_take_the_same_path():
    x = np.random.default_rng(0).standard_normal((64, 256)).astype(np.float32)
    y = softmax_of(64, 256, (16, 256))(x)
    ref = torch.softmax(torch.from_numpy(x), -1).numpy()
    np.testing.assert_allclose(y, ref, atol=1e-6, rtol=1e-5)


def test_the_decision_is_the_view_attribute_in_the_pto_text_and_a_note_of_the_pass():
    x = torch.randn(64, 256)
    compiled = pypto.compile(softmax_of(64, 256, (16, 256)), x)
    pto = compiled.pto()
    assert re.search(r"= tload %x\[[^\]]*\][^:]* view : ", pto), pto
    # Every viewing load in the .pto is a tload_view in the kernel.
    assert compiled.source().count("pto::tload_view") == pto.count(" view : ")
    passes = compiled.dump("passes")
    assert re.search(r"-- pass plan_view_loads .*\n   note: @\w+: \d+ load\(s\) may view their source", passes)
    # Disabled, every load copies, with the same results.
    pypto.set_pass_options(disable_passes=["plan_view_loads"])
    try:
        plain = pypto.compile(softmax_of(64, 256, (16, 256)), x)
    finally:
        pypto.reset_options()
    assert " view : " not in plain.pto() and "pto::tload_view" not in plain.source()
    torch.testing.assert_close(plain(x), compiled(x), atol=0, rtol=0)


@pytest.mark.parametrize("rows", [4, 8, 3, 90])
def test_a_view_of_a_local_buffer_is_not_overwritten_by_a_tile_placed_over_it(rows):
    # The rsqrt of each row's sum goes through two local buffers; the tile of the final product was
    # placed over the second one once its last load ran, so a view load of it (instead of a copy)
    # read values the product was overwriting: wrong results for whole tiles, silently.
    @pypto.frontend.jit
    def l2norm(q: pypto.Tensor((pypto.DYNAMIC, 2, 32), pypto.DT_BF16)) -> pypto.Tensor((pypto.DYNAMIC, 2, 32), pypto.DT_FP32):
        pypto.set_vec_tile_shapes(4, 4, 32)
        x = pypto.cast(q, pypto.DT_FP32)
        return x * pypto.rsqrt(pypto.sum(x * x, -1, True) + 1e-6)

    q = torch.randn(rows, 2, 32).bfloat16()
    x = q.float()
    torch.testing.assert_close(l2norm(q), x * torch.rsqrt((x * x).sum(-1, keepdim=True) + 1e-6))
