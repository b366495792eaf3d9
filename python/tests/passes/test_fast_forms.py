"""Fast forms of fused fp32 sines, cosines and tangents (pass fast_forms, csrc/passes/fast_forms.cc;
printed by the kernel emitter): a strip of a fused chain evaluates them with a reduction that is
exact below 2^17 (2^28 for tan, and without fused multiply-add) and redoes the strip with the full
forms when an element lies outside (large, infinite or nan), its row sums restarted. Results must
match torch in float64 (rounded once) within the op table's 1 ulp whichever strips hold such
elements, and match the full forms bit for bit outside the fast domain. The .pto text shows the
decision as `fast=[...]` on FUSED.
"""

import re

import numpy as np
import pytest
import torch

import pypto

FNS = {"sin": torch.sin, "cos": torch.cos, "tan": torch.tan}
# With and without fused multiply-add (the float and the double fast forms), where this CPU runs them.
RUNNABLE = [t for t in ("native", "x86-64-v2", "generic") if not pypto._C.cpu_target_info(t)["missing_here"]]


def trig_kernel(name, shape, tile, with_sum=False):
    @pypto.jit
    def f(x: pypto.Tensor(shape, pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(*tile)
        y = getattr(pypto, name)(x)
        if with_sum:
            return pypto.sum(y * 2.0, -1, True)
        return y
    return f


def one_ulp_close(got, want64):
    """|got - want| <= 1 ulp of the float nearest `want64` (nan where it is nan)."""
    want = want64.float()
    assert torch.equal(torch.isnan(got), torch.isnan(want))
    ok = ~torch.isnan(want)
    g, w = got[ok].double(), want[ok].double()
    ulp = torch.from_numpy(np.spacing(np.abs(want[ok].numpy())).astype(np.float64))
    bad = (g - w).abs() > ulp
    assert not bad.any(), (got[ok][bad][:5], want[ok][bad][:5])


def inputs(shape, seed, outliers):
    g = torch.Generator().manual_seed(seed)
    x = (torch.rand(shape, generator=g, dtype=torch.float64) * 2 - 1) * 2e3
    flat = x.view(-1)
    for i, v in zip(range(7, flat.numel(), 911), outliers):  # a few strips hold one each
        flat[i] = v
    return x.float()


OUTLIERS = [3e30, -1e9, float("inf"), float("nan"), 268435456.0, -268435440.0, 16367173.0 * 2.0 ** 72]


@pytest.mark.parametrize("name", sorted(FNS))
@pytest.mark.parametrize("shape, tile", [((64, 1024), (16, 1024)), ((37, 300), (8, 128))])
@pytest.mark.parametrize("target", RUNNABLE)
def test_fast_forms_match_torch_with_and_without_outliers(name, shape, tile, target):
    pypto.set_cpu_target(target)
    try:
        check_fast_forms(name, shape, tile)
    finally:
        pypto.set_cpu_target(None)


def check_fast_forms(name, shape, tile):
    f = trig_kernel(name, shape, tile)
    compiled = pypto.compile(f, torch.zeros(shape))
    if shape[1] % tile[1] == 0:
        assert re.search(r"FUSED .*fast=\[%\w+\]", compiled.pto()), compiled.pto()
        assert "_fout" in compiled.source()
    else:  # tiles with a tail are not fused: the tile library's tunary takes the fast form per tile
        assert "FUSED" not in compiled.pto()
    for seed, outliers in ((0, []), (1, OUTLIERS)):
        x = inputs(shape, seed, outliers)
        one_ulp_close(f(x), FNS[name](x.double()))


def test_a_redone_strip_restarts_its_row_sums():
    shape = (16, 2048)
    f = trig_kernel("sin", shape, (4, 2048), with_sum=True)
    assert "fast=[" in pypto.compile(f, torch.zeros(shape)).pto()
    x = inputs(shape, 2, [1e20, -5e8, 123456789.0, -3e9])  # rows 0, 0, 1 and 1: a strip is redone twice
    ref = (torch.sin(x.double()) * 2).sum(-1, keepdim=True).float()
    torch.testing.assert_close(f(x), ref, rtol=1e-5, atol=1e-3)


def test_a_dynamic_dim_and_the_numpy_path():
    @pypto.jit
    def f(x: pypto.Tensor([pypto.DYNAMIC, 512], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 512)
        return pypto.cos(x)
    for rows in (3, 40):
        x = inputs((rows, 512), rows, OUTLIERS)
        one_ulp_close(torch.from_numpy(f(x.numpy())), torch.cos(x.double()))


def test_disabled_the_full_forms_run_and_both_are_within_one_ulp():
    shape = (32, 1024)
    x = inputs(shape, 3, OUTLIERS)
    fast = trig_kernel("sin", shape, (8, 1024))(x)
    pypto.set_pass_options(disable_passes=["fast_forms"])
    try:
        compiled = pypto.compile(trig_kernel("sin", shape, (8, 1024)), x)
        assert "fast=" not in compiled.pto() and "_fout" not in compiled.source()
        full = compiled(x)
    finally:
        pypto.reset_options()
    ref = torch.sin(x.double())
    one_ulp_close(full, ref)
    one_ulp_close(fast, ref)
    # Outside the fast domain (the outliers) the redone strips give the full forms' bits.
    big = ~(x.abs() < 131072.0) & ~torch.isnan(x)
    assert big.sum() >= 5
    torch.testing.assert_close(fast[big], full[big], rtol=0, atol=0, equal_nan=True)


def test_a_value_written_back_keeps_the_full_form():
    shape = (32, 1024)

    @pypto.jit
    def f(x: pypto.Tensor(shape, pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 1024)
        s = pypto.sin(x)
        return s, s + s
    x = inputs(shape, 4, OUTLIERS)
    compiled = pypto.compile(f, x)
    assert "fast=" not in compiled.pto()
    assert "keep their full forms" in compiled.dump("passes")
    s, t = compiled(x)
    one_ulp_close(s, torch.sin(x.double()))
    torch.testing.assert_close(t, s + s, equal_nan=True)
