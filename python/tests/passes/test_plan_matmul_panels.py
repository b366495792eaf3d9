"""b operands of float matmuls loaded in column panels (pass plan_matmul_panels,
csrc/passes/plan_matmul_panels.cc; the kernels call pto::tload_panels and pto::tmatmul_panels): the
decision is the `panels=W` attribute of the tload and the tmatmul in the .pto text, W the target's
micro-kernel width. The products must match a float64 reference, and the program with the pass
disabled bit for bit (the same products, summed along k in the same order). Left to itself the pass
lays b out in panels only on a CPU whose first-level data cache is at most 32 KiB; the tests of its
shape rules ask for panels (pass option matmul_panels=True) so that they hold on every CPU."""

import re

import pytest
import torch

import pypto
import pypto.pto

ROWS = pypto.frontend.dynamic("ROWS")
TORCH_OF = {pypto.DT_FP32: torch.float32, pypto.DT_BF16: torch.bfloat16, pypto.DT_FP16: torch.float16}


L1D_BYTES = pypto._C.cpu_target_info("native")["l1d_bytes"]
# Where the CPU has bf16 dot products, bf16 operands stay bf16 (packed in pairs of k by tmatmul,
# not loaded in panels).
BF16_DOT = pypto._C.cpu_target_info("native")["bf16_dot_products"] != ""


def product(m, k, n, dtype=pypto.DT_FP32, b_trans=False, cube=None, panels=True, dynamic=False):
    """panels: True asks for panels, None leaves the choice to the pass, False disables it."""
    w_shape = (n, k) if b_trans else (k, n)
    opts = {"matmul_panels": True} if panels else {} if panels is None else {"disable_passes": ["plan_matmul_panels"]}

    @pypto.frontend.jit(pass_options=opts)
    def mm(a: pypto.Tensor((ROWS if dynamic else m, k), dtype), w: pypto.Tensor(w_shape, dtype)):
        if cube:
            pypto.set_cube_tile_shapes(*cube)
        return pypto.matmul(a, w, pypto.DT_FP32, b_trans=b_trans)

    return mm


def operands(m, k, n, dtype, b_trans, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g).to(TORCH_OF[dtype])
    w = (torch.randn(*((n, k) if b_trans else (k, n)), generator=g) / k ** 0.5).to(TORCH_OF[dtype])
    want = a.double() @ (w.double().T if b_trans else w.double())
    return a, w, want


@pytest.mark.parametrize("dtype", [pypto.DT_FP32, pypto.DT_BF16, pypto.DT_FP16])
@pytest.mark.parametrize("m,k,n,cube", [
    (128, 160, 256, None),                                  # default cube tiles, two in n
    (200, 150, 160, ([32, 64], [128, 128], [32, 128])),     # tails in m, k and n; L0 blocks
    (64, 512, 160, ([64, 64], [128, 128], [64, 128])),      # k in several tiles (tmatmul_acc)
])
@pytest.mark.parametrize("b_trans", [False, True])
def test_products_match_the_reference_and_the_row_layout(m, k, n, cube, dtype, b_trans):
    a, w, want = operands(m, k, n, dtype, b_trans)
    fast = product(m, k, n, dtype, b_trans, cube)
    got = fast(a, w)
    torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-4)
    assert torch.equal(got, product(m, k, n, dtype, b_trans, cube, panels=False)(a, w))
    compiled = pypto.compile(fast, a, w)
    text = compiled.pto()
    loads = re.findall(r"tload %\w+\[[^\]]*\][^:]* panels=(\d+) :", text)
    products = re.findall(r"tmatmul(?:_acc)? [^:]* panels=(\d+) :", text)
    if BF16_DOT and dtype == pypto.DT_BF16:
        assert not loads and not products and "xbf16>" in text, text
        return
    assert loads and products, text
    assert len(set(loads + products)) == 1
    assert "panels of" in compiled.dump("passes")


@pytest.mark.parametrize("rows", [1, 5, 17, 64, 100])
def test_a_dynamic_m_in_panels(rows):
    # Valid rows at run time: those of a register block, of a chunk and of the tile.
    k, n = 160, 256
    a, w, want = operands(rows, k, n, pypto.DT_FP32, False, seed=rows)
    cube = ([64, 64], [160, 160], [64, 128])
    got = product(rows, k, n, cube=cube, dynamic=True)(a, w)
    torch.testing.assert_close(got.double(), want, rtol=1e-4, atol=1e-4)
    assert torch.equal(got, product(rows, k, n, cube=cube, dynamic=True, panels=False)(a, w))
    assert "panels=" in pypto.compile(product(rows, k, n, cube=cube, dynamic=True), a, w).pto()


def test_products_of_few_rows_small_blocks_and_odd_widths_keep_rows():
    # Fewer than 16 rows of a: b stays by rows (it may view its source); n the width does not
    # divide, or of at most two panels (16 columns: two of 8, one of 16, or none of 32): no panels
    # either; nor a b whose block of k rows fits the first-level cache (32 x 128 floats: 16 KiB);
    # all still match the reference.
    for m, k, n in ((8, 256, 64), (64, 256, 40), (64, 256, 16), (64, 32, 128)):
        a, w, want = operands(m, k, n, pypto.DT_FP32, False)
        mm = product(m, k, n, cube=([m, m], [k, k], [n, n]))
        torch.testing.assert_close(mm(a, w).double(), want, rtol=1e-4, atol=1e-4)
        assert "panels=" not in pypto.compile(mm, a, w).pto()


@pytest.mark.parametrize("m,n,laid_out", [(64, 128, False), (128, 64, False), (128, 128, True)])
def test_a_b_that_may_be_read_in_place_takes_panels_only_for_large_products(m, n, laid_out):
    # The tile spans the weight's rows, so its load may view it (no copy): panels only when a has at
    # least 128 rows and b at least 128 columns (rows that share few cache sets).
    k = 256
    a, w, want = operands(m, k, n, pypto.DT_FP32, False)
    cube = ([m, m], [k, k], [n, n])
    mm = product(m, k, n, cube=cube)
    torch.testing.assert_close(mm(a, w).double(), want, rtol=1e-4, atol=1e-4)
    assert ("panels=" in pypto.compile(mm, a, w).pto()) == laid_out


def test_the_width_follows_the_cpu_target():
    a, w, _ = operands(64, 256, 256, pypto.DT_FP32, False)
    widths = {}
    for target in ("x86-64-v3", "x86-64-v4", "generic"):
        pypto.set_cpu_target(target)
        try:
            text = pypto.compile(product(64, 256, 256), a, w).pto()
        finally:
            pypto.set_cpu_target("native")
        widths[target] = set(re.findall(r"panels=(\d+)", text))
    assert widths == {"x86-64-v3": {"16"}, "x86-64-v4": {"32"}, "generic": {"8"}}


def test_the_pto_text_with_panels_round_trips_and_runs():
    # The .pto text of a program with the decision parses back to itself, and compiled from that text
    # (the pass runs again, on the InCore functions' memrefs) it gives the jitted kernel's result.
    a, w, want = operands(64, 256, 256, pypto.DT_FP32, False)
    compiled = pypto.compile(product(64, 256, 256), a, w)
    text = compiled.pto()
    assert "panels=" in text
    assert pypto.pto.parse(text).to_pto() == text
    out = torch.empty(64, 256)
    pypto.pto.compile(text, matmul_panels=True)(a, w, out)
    assert torch.equal(out, compiled(a, w))


def test_left_to_itself_the_pass_follows_the_first_level_cache():
    # On this CPU's target: panels exactly when its L1d is at most 32 KiB, and dump("passes") says
    # why not otherwise; the options None and False, and asking for panels, all give the same sums.
    a, w, want = operands(128, 256, 256, pypto.DT_FP32, False)
    auto = pypto.compile(product(128, 256, 256, panels=None), a, w)
    assert ("panels=" in auto.pto()) == (L1D_BYTES <= 32 << 10)
    if L1D_BYTES > 32 << 10:
        assert f"the target's L1d is {L1D_BYTES >> 10} KiB" in auto.dump("passes")
    torch.testing.assert_close(auto(a, w).double(), want, rtol=1e-4, atol=1e-4)
    for flag in (True, False):
        @pypto.frontend.jit(pass_options={"matmul_panels": flag})
        def mm(x: pypto.Tensor((128, 256), pypto.DT_FP32), y: pypto.Tensor((256, 256), pypto.DT_FP32)):
            return pypto.matmul(x, y, pypto.DT_FP32)

        assert ("panels=" in pypto.compile(mm, a, w).pto()) == flag
        assert torch.equal(mm(a, w), auto(a, w))


def test_the_option_takes_a_bool_or_none():
    with pytest.raises(TypeError, match="pass option 'matmul_panels' must be bool or None, found int"):
        pypto.set_pass_options(matmul_panels=1)
    pypto.set_pass_options(matmul_panels=True)
    try:
        assert pypto.get_pass_options()["matmul_panels"] is True
    finally:
        pypto.set_pass_options(matmul_panels=None)
    assert pypto.get_pass_options().get("matmul_panels") is None
