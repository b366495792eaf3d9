"""bf16 operands of a float matmul multiplied by bf16 dot products (csrc/codegen/tile_ops/matmul_bf16.h):
AMX-BF16 tiles where the CPU has them, else AVX512-BF16's VDPBF16PS; on targets with neither the
operands widen to fp32 tiles as they load. Every form must give torch's product of the same bf16
values, on each target this machine runs."""

import re

import pytest
import torch

import pypto
from pypto import _C

TARGETS = [t for t in _C.cpu_targets() if not _C.cpu_target_info(t)["missing_here"]]
HOST = list(_C.cpu_target_info("native")["features"])
ROWS = pypto.frontend.dynamic("ROWS")


pytestmark = pytest.mark.usefixtures("fresh_cpu_target")


def product(m, k, n, out_dtype, cube=None, dynamic=False):
    @pypto.frontend.jit
    def mm(a: pypto.Tensor((ROWS if dynamic else m, k), pypto.DT_BF16), b: pypto.Tensor((k, n), pypto.DT_BF16)):
        if cube:
            pypto.set_cube_tile_shapes(*cube)
        return pypto.matmul(a, b, out_dtype=out_dtype)

    return mm


def operands(m, k, n, seed):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g).bfloat16()
    b = (torch.randn(k, n, generator=g) / k ** 0.5).bfloat16()
    return a, b, a.double() @ b.double()


def check(got, want, out_dtype):
    if out_dtype == pypto.DT_FP32:
        assert got.dtype == torch.float32
        torch.testing.assert_close(got.double(), want, rtol=1e-5, atol=1e-5)
    else:  # one bf16 rounding of the float product
        assert got.dtype == torch.bfloat16
        torch.testing.assert_close(got.double(), want, rtol=8e-3, atol=8e-3)


def test_bf16_dot_products_follow_the_targets_features():
    # No psABI level has them: x86-64-v4 widens; native follows the CPU's features.
    assert _C.cpu_target_info("x86-64-v4")["bf16_dot_products"] == ""
    v4 = list(_C.cpu_target_info("x86-64-v4")["features"])
    x86 = _C.cpu_target_info("native")["arch"] == "x86_64"
    try:
        _C.testing.set_host_features(v4 + ["avx512_bf16", "amx_tile", "amx_bf16"])
        info = _C.cpu_target_info("native")
        assert info["bf16_dot_products"] == ("amx" if x86 else "")
        assert ("bf16 dot products: amx" in info["description"]) == x86
        _C.testing.set_host_features(v4 + ["avx512_bf16"])
        assert _C.cpu_target_info("native")["bf16_dot_products"] == ("avx512" if x86 else "")
        _C.testing.set_host_features(v4 + ["amx_tile", "amx_bf16"])  # AMX without AVX512-BF16: none
        assert _C.cpu_target_info("native")["bf16_dot_products"] == ""
        v3 = list(_C.cpu_target_info("x86-64-v3")["features"])
        _C.testing.set_host_features(v3 + ["avx512_bf16"])  # no AVX-512 library: none
        assert _C.cpu_target_info("native")["bf16_dot_products"] == ""
    finally:
        _C.testing.set_host_features(None)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("m,k,n,cube", [
    (128, 160, 256, None),                                  # default cube tiles
    (200, 150, 160, ([32, 64], [128, 128], [32, 128])),     # tails in m, k and n
    (64, 512, 96, ([64, 64], [128, 128], [64, 64])),        # k in several tiles (tmatmul_acc)
    (5, 3, 7, None),                                        # smaller than one register block
])
@pytest.mark.parametrize("out_dtype", [pypto.DT_FP32, pypto.DT_BF16])
def test_products_match_torch_on_each_target(target, m, k, n, cube, out_dtype):
    pypto.set_cpu_target(target)
    a, b, want = operands(m, k, n, seed=m + k + n)
    mm = product(m, k, n, out_dtype, cube)
    check(mm(a, b), want, out_dtype)
    compiled = pypto.compile(mm, a, b)
    dot = _C.cpu_target_info(target)["bf16_dot_products"]
    level = {"amx": 2, "avx512": 1, "": 0}[dot]
    assert f"#define PTO_BF16_DOT {level}" in compiled.source()
    # With dot products the loads keep bf16 tiles for the product; without, they widen to f32.
    loads = re.findall(r"tload %[ab]\[[^\n]*: !pto\.tile<[0-9x]+x(\w+)>", compiled.pto())
    assert loads and set(loads) == {"bf16" if dot else "f32"}, compiled.pto()
    assert ("bf16 operands multiplied by" in compiled.dump("passes")) == bool(dot)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("rows", [1, 17, 33, 100])
def test_a_dynamic_m(target, rows):
    # Valid rows at run time: inside a 32-row block, past one, and a partial last tile.
    pypto.set_cpu_target(target)
    k, n = 96, 80
    a, b, want = operands(rows, k, n, seed=rows)
    got = product(rows, k, n, pypto.DT_FP32, ([64, 64], [96, 96], [64, 64]), dynamic=True)(a, b)
    assert got.shape == (rows, n)
    check(got, want, pypto.DT_FP32)


def test_the_vdpbf16ps_kernel_where_the_cpu_has_avx512_bf16():
    # An AVX512-BF16 CPU without AMX (as AMD's Zen 4 and Zen 5): the VDPBF16PS micro-kernel, which
    # on a CPU with AMX runs only where the OS refuses the tile state. Where this CPU lacks
    # AVX512-BF16 the bf16 product widens, and must give the same numbers.
    runs_here = "avx512_bf16" in HOST and _C.cpu_target_info("native")["library"] == "avx512"
    _C.testing.set_host_features([f for f in HOST if not f.startswith("amx")])
    assert _C.cpu_target_info("native")["bf16_dot_products"] == ("avx512" if runs_here else "")
    for m, k, n, cube in [(128, 160, 256, None), (37, 33, 45, ([16, 16], [32, 32], [32, 32]))]:
        a, b, want = operands(m, k, n, seed=k)
        mm = product(m, k, n, pypto.DT_FP32, cube)
        check(mm(a, b), want, pypto.DT_FP32)
        assert f"#define PTO_BF16_DOT {1 if runs_here else 0}" in pypto.compile(mm, a, b).source()
        check(linear(m, k, n, pypto.DT_FP32, cube)(a, b.t().contiguous()), want, pypto.DT_FP32)


def test_dot_products_sum_the_same_values_as_the_widened_product():
    # Both forms multiply the same bf16 values in fp32: they differ only in the order of the sums.
    a, b, _ = operands(96, 256, 128, seed=3)
    mm = product(96, 256, 128, pypto.DT_FP32)
    native = mm(a, b)
    pypto.set_cpu_target("generic")
    generic = mm(a, b)
    torch.testing.assert_close(native, generic, rtol=2e-6, atol=2e-6)
    torch.testing.assert_close(native, a.float() @ b.float(), rtol=2e-6, atol=2e-6)


def linear(m, k, n, out_dtype, cube=None, dynamic=False):
    """a @ w^T with w in nn.Linear's [out, in] layout (matmul b_trans=True)."""
    @pypto.frontend.jit
    def lin(a: pypto.Tensor((ROWS if dynamic else m, k), pypto.DT_BF16), w: pypto.Tensor((n, k), pypto.DT_BF16)):
        if cube:
            pypto.set_cube_tile_shapes(*cube)
        return pypto.matmul(a, w, out_dtype=out_dtype, b_trans=True)

    return lin


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("m,k,n,cube", [
    (128, 256, 192, None),                                  # default cube tiles
    (200, 150, 160, ([32, 64], [128, 128], [32, 128])),     # tails in m, k and n
    (64, 512, 96, ([64, 64], [128, 128], [64, 64])),        # k in several tiles (tmatmul_acc)
    (40, 33, 20, ([16, 16], [32, 32], [16, 16])),           # odd k: a pair straddles two rows of w
    (1, 4096, 40, ([1, 1], [4096, 4096], [16, 16])),        # a decode step: one row, whole-row tiles
    (6, 200, 37, ([8, 8], [128, 128], [16, 16])),           # few rows, tails in k and n
])
@pytest.mark.parametrize("out_dtype", [pypto.DT_FP32, pypto.DT_BF16])
def test_products_with_a_transposed_b_match_torch(target, m, k, n, cube, out_dtype):
    # With dot products the [N, K] weight is loaded as it lies and packed from there (its pairs of
    # k are adjacent); without, it is transposed as it loads and widened.
    pypto.set_cpu_target(target)
    a, b, want = operands(m, k, n, seed=m * k + n)
    w = b.t().contiguous()
    lin = linear(m, k, n, out_dtype, cube)
    check(lin(a, w), want, out_dtype)
    compiled = pypto.compile(lin, a, w)
    dot = bool(_C.cpu_target_info(target)["bf16_dot_products"])
    few = m <= 8   # at most 8 rows: dot products along k of a's and w's rows, nothing packed
    pto, passes = compiled.pto(), compiled.dump("passes")
    assert bool(re.search(r"tmatmul[^\n]* b_trans", pto)) == (dot or few), pto
    assert ("b packed from its [N, K] layout" in passes) == (dot and not few)
    assert ("dot products along k of rows as they lie" in passes) == (dot and few)
    loads = re.findall(r"tload %[aw]\[[^\n]*: !pto\.tile<[0-9x]+x(\w+)>", pto)
    # Without dot products the loads widen, but for a b read b_trans by few rows (widened as read).
    assert loads and set(loads) == ({"bf16"} if dot else {"f32", "bf16"} if few else {"f32"}), pto


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("rows,cube", [
    (9, ([64, 64], [96, 96], [64, 64])), (33, ([64, 64], [96, 96], [64, 64])), (100, ([64, 64], [96, 96], [64, 64])),
    (3, ([8, 8], [96, 96], [16, 16])), (13, ([8, 8], [64, 64], [16, 16])),   # few-row tiles, a partial last one
])
def test_a_transposed_b_with_a_dynamic_m(target, rows, cube):
    pypto.set_cpu_target(target)
    k, n = 96, 80
    a, b, want = operands(rows, k, n, seed=rows + 1)
    got = linear(rows, k, n, pypto.DT_FP32, cube, dynamic=True)(a, b.t().contiguous())
    assert got.shape == (rows, n)
    check(got, want, pypto.DT_FP32)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("transposed", [False, True])
def test_operand_tiles_are_read_where_they_lie_with_the_row_pitch(target, transposed):
    # k in four tiles, n in a whole and a partial tile: interior tiles of a and b are views with
    # their tensor's row pitch (tload ... view strided), the partial ones copies; both multiply the
    # same values. Without dot products the tiles widen to f32, which is no view.
    pypto.set_cpu_target(target)
    m, k, n = 64, 512, 96
    cube = ([64, 64], [128, 128], [64, 64])
    a, b, want = operands(m, k, n, seed=11)
    fn = linear(m, k, n, pypto.DT_FP32, cube) if transposed else product(m, k, n, pypto.DT_FP32, cube)
    args = (a, b.t().contiguous()) if transposed else (a, b)
    check(fn(*args), want, pypto.DT_FP32)
    compiled = pypto.compile(fn, *args)
    dot = bool(_C.cpu_target_info(target)["bf16_dot_products"])
    strided = re.findall(r"tload %\w+\[[^\n]* view strided :", compiled.pto())
    assert len(strided) == (4 if dot else 0), compiled.pto()   # a and b, first k tile and the loop
    assert ("strided (bf16 matmul operands)" in compiled.dump("passes")) == dot


COLS = pypto.frontend.dynamic("COLS")


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("cols", [1, 16, 17, 33, 64, 100])
def test_a_dynamic_n_multiplies_only_the_valid_columns(target, transposed, cols):
    # N known at run time (the tokens of a W @ x^T): with dot products the tmatmul carries the
    # valid columns (one panel of 16 for a last pair with at most 16, none past them); k in two
    # tiles accumulates into the same valid columns. Every count matches torch.
    pypto.set_cpu_target(target)
    m, k = 72, 192
    cube = ([64, 64], [96, 96], [64, 64])

    @pypto.frontend.jit
    def w_xt(w: pypto.Tensor((m, k), pypto.DT_BF16), x: pypto.Tensor((COLS, k) if transposed else (k, COLS), pypto.DT_BF16)):
        pypto.set_cube_tile_shapes(*cube)
        return pypto.matmul(w, x, out_dtype=pypto.DT_FP32, b_trans=transposed)

    w, b, want = operands(m, k, cols, seed=cols + 7 * transposed)
    x = b.t().contiguous() if transposed else b
    got = w_xt(w, x)
    assert got.shape == (m, cols)
    check(got, want, pypto.DT_FP32)
    pto = pypto.compile(w_xt, w, x).pto()
    # The product's valid extents name the run-time columns, whether bf16 dot products multiply or
    # the operands widen to float as they load (float products multiply only those columns too).
    assert re.search(r"tmatmul[^\n]* valid \[[^\]]*COLS", pto), pto
