"""matmul against torch (issue 3): 2-D and batched with broadcast batch dims,
transposed operands, fp32/fp16/bf16/int inputs, shapes off the tile grid."""

import re

import pytest
import torch

import pypto

PT = {torch.float32: pypto.DT_FP32, torch.float16: pypto.DT_FP16, torch.bfloat16: pypto.DT_BF16,
      torch.int32: pypto.DT_INT32, torch.float64: pypto.DT_DOUBLE}


def mm_kernel(sa, sb, dt, a_trans=False, b_trans=False, cube=([16, 32], [32, 64], [16, 32]), out_dtype=None):
    @pypto.jit
    def f(a: pypto.Tensor(sa, dt), b: pypto.Tensor(sb, dt)):
        pypto.set_cube_tile_shapes(*cube)
        return pypto.matmul(a, b, out_dtype, a_trans=a_trans, b_trans=b_trans)

    return f


@pytest.mark.parametrize("m,k,n", [(64, 64, 64), (100, 200, 72), (1, 512, 1), (257, 129, 65)])
def test_matmul_2d_fp32(m, k, n):
    a, b = torch.randn(m, k), torch.randn(k, n)
    torch.testing.assert_close(mm_kernel((m, k), (k, n), pypto.DT_FP32)(a, b), a @ b, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("a_trans,b_trans", [(True, False), (False, True), (True, True)])
def test_matmul_transposed(a_trans, b_trans):
    m, k, n = 37, 50, 29
    a = torch.randn(k, m) if a_trans else torch.randn(m, k)
    b = torch.randn(n, k) if b_trans else torch.randn(k, n)
    ref = (a.t() if a_trans else a) @ (b.t() if b_trans else b)
    got = mm_kernel(tuple(a.shape), tuple(b.shape), pypto.DT_FP32, a_trans, b_trans)(a, b)
    torch.testing.assert_close(got, ref, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("sa,sb", [((3, 20, 30), (3, 30, 10)), ((2, 1, 9, 16), (5, 16, 7)), ((9, 16), (4, 16, 7))])
def test_matmul_batched_broadcast(sa, sb):
    a, b = torch.randn(*sa), torch.randn(*sb)
    torch.testing.assert_close(mm_kernel(sa, sb, pypto.DT_FP32)(a, b), a @ b, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("dtype,tol", [(torch.float16, 2e-2), (torch.bfloat16, 5e-2), (torch.float64, 1e-10)])
def test_matmul_low_precision_inputs(dtype, tol):
    a, b = torch.randn(70, 90).to(dtype), torch.randn(90, 33).to(dtype)
    got = mm_kernel((70, 90), (90, 33), PT[dtype])(a, b)
    assert got.dtype == dtype
    torch.testing.assert_close(got.double(), a.double() @ b.double(), atol=tol * 5, rtol=tol)
    got32 = mm_kernel((70, 90), (90, 33), PT[dtype], out_dtype=pypto.DT_FP32)(a, b)
    assert got32.dtype == torch.float32
    tol32 = max(tol, 1e-5)
    torch.testing.assert_close(got32.double(), a.double() @ b.double(), atol=tol32 * 5, rtol=tol32)


def test_matmul_int32_and_operator_and_numpy():
    a, b = torch.randint(-5, 5, (12, 20), dtype=torch.int32), torch.randint(-5, 5, (20, 9), dtype=torch.int32)

    @pypto.jit
    def f(x: pypto.Tensor((12, 20), pypto.DT_INT32), y: pypto.Tensor((20, 9), pypto.DT_INT32)):
        return x @ y

    assert torch.equal(f(a, b), a @ b)
    assert (f(a.numpy(), b.numpy()) == (a @ b).numpy()).all()


@pytest.mark.parametrize("rows", [16, 19])  # divides the m tile, or does not
def test_split_k_and_matrix_size_are_accepted_and_change_nothing(rows):
    R = pypto.frontend.dynamic("R")

    @pypto.jit
    def f(x: pypto.Tensor((R, 24), pypto.DT_FP16), y: pypto.Tensor((24, 40), pypto.DT_FP16)):
        pypto.set_cube_tile_shapes([8, 16], [8, 16], [16, 16], enable_split_k=True)
        assert pypto.get_cube_tile_shapes() == ([8, 16], [8, 16], [16, 16], True)
        pypto.set_matrix_size([x.shape[0], 24, 40])
        return pypto.matmul(x, y, pypto.DT_FP32)

    x, y = torch.randn(rows, 24).half(), torch.randn(24, 40).half()
    got = f(x, y)
    torch.testing.assert_close(got, x.float() @ y.float(), rtol=1e-3, atol=1e-3)
    recorded = pypto.frontend.config.recorded_options()  # kept, with one OptionWarning each per process
    assert recorded["cube_tile_shapes.enable_split_k"] is True and str(recorded["matmul.matrix_size"][1]) == "24"


def test_cube_tile_queries_and_errors():
    @pypto.jit
    def f(x: pypto.Tensor((8, 8), pypto.DT_FP32)):
        pypto.set_cube_tile_shapes(m=[8, 16], k=[16, 32], n=[8, 8])
        assert pypto.get_cube_tile_shapes() == ([8, 16], [16, 32], [8, 8], False)
        pypto.set_vec_tile_shapes(8, 8)
        assert pypto.get_vec_tile_shapes() == (8, 8)
        return x @ x

    x = torch.randn(8, 8)
    torch.testing.assert_close(f(x), x @ x)
    with pytest.raises(TypeError, match=r"m must be \[L0, L1\]"):
        pypto.set_cube_tile_shapes([1, 2, 3], [1, 2], [1, 2])
    with pytest.raises(TypeError, match=r"enable_split_k must be a bool, found str 'yes'"):
        pypto.set_cube_tile_shapes([8, 8], [8, 8], [8, 8], "yes")
    with pytest.raises(TypeError, match=r"pypto.set_matrix_size: size must be a list \[m, k, n\], found \[32, 64\]"):
        pypto.set_matrix_size([32, 64])
    with pytest.raises(ValueError, match=r"pypto.set_matrix_size: k must be positive, found 0"):
        pypto.set_matrix_size([32, 0, 16])

    @pypto.jit
    def g(x: pypto.Tensor((8, 5), pypto.DT_FP32), y: pypto.Tensor((6, 3), pypto.DT_FP32)):
        return x @ y

    with pytest.raises(ValueError, match=r"pypto.matmul at .*test_matmul.py:\d+: shapes \[8, 5\] and \[6, 3\] cannot be multiplied"):
        g(torch.randn(8, 5), torch.randn(6, 3))


SMALL_CUBE = ([32, 32], [512, 512], [32, 32])


@pytest.mark.parametrize("m,k,n,cube", [(64, 2048, 48, SMALL_CUBE), (37, 301, 45, SMALL_CUBE), (5, 3, 70, SMALL_CUBE),
                                        (130, 302, 150, ([64, 64], [256, 256], [128, 128]))])
def test_int8_matmul_is_an_exact_int32_product_of_int8_tiles(m, k, n, cube):
    """int8 operands stay int8 in their tiles (the tile matmul widens or offsets them as it packs
    them) and the int32 product is exact: past the 2^24 that fp32 holds exactly (k = 2048 with -128
    rows and columns), with odd k, with k of every remainder modulo 4 (the int8 dot products take
    four k at a time), and with rows and columns off the tile grid (128-wide n tiles: three-vector
    column blocks on AVX-512)."""
    g = torch.Generator().manual_seed(m * k + n)
    a = torch.randint(-128, 128, (m, k), generator=g, dtype=torch.int8)
    b = torch.randint(-128, 128, (k, n), generator=g, dtype=torch.int8)
    a[0], b[:, 0] = -128, -128
    a[-1], b[:, -1] = 127, -128
    f = mm_kernel((m, k), (k, n), pypto.DT_INT8, cube=cube, out_dtype=pypto.DT_INT32)
    got = f(a, b)
    assert got.dtype == torch.int32
    assert torch.equal(got, (a.long() @ b.long()).int())
    pto = pypto.compile(f, a, b).dump("pto")
    loads = [line for line in pto.splitlines() if " = tload %" in line]
    assert loads and all("xi8>" in line for line in loads), pto
    assert "xi64>" not in pto and "tcast" not in pto, pto


def test_int8_matmul_with_a_dynamic_dim_and_the_numpy_path():
    @pypto.jit
    def f(x: pypto.Tensor([pypto.DYNAMIC, 300], pypto.DT_INT8), y: pypto.Tensor((300, 40), pypto.DT_INT8)):
        pypto.set_cube_tile_shapes([16, 16], [128, 128], [32, 32])
        return pypto.matmul(x, y, pypto.DT_INT32)

    g = torch.Generator().manual_seed(5)
    b = torch.randint(-128, 128, (300, 40), generator=g, dtype=torch.int8)
    for rows in (1, 17, 64):
        a = torch.randint(-128, 128, (rows, 300), generator=g, dtype=torch.int8)
        assert torch.equal(f(a, b), (a.long() @ b.long()).int())
    assert (f(a.numpy(), b.numpy()) == (a.long() @ b.long()).int().numpy()).all()


def test_int32_matmul_wraps_as_int32_arithmetic():
    """An int32 product accumulates in int32 (modulo 2^32, as torch's int32 matmul): values past
    int16 take another path through the tile matmul than int8-range ones."""
    g = torch.Generator().manual_seed(2)
    a = torch.randint(-2 ** 31, 2 ** 31 - 1, (20, 33), generator=g, dtype=torch.int32)
    b = torch.randint(-2 ** 31, 2 ** 31 - 1, (33, 24), generator=g, dtype=torch.int32)
    want = ((a.long() @ b.long()) % 2 ** 32).to(torch.int64)
    want = torch.where(want >= 2 ** 31, want - 2 ** 32, want).int()
    got = mm_kernel((20, 33), (33, 24), pypto.DT_INT32)(a, b)
    assert torch.equal(got, want)


ROWS = pypto.frontend.dynamic("ROWS")


@pytest.mark.parametrize("rows", [1, 3, 9, 64, 70])
@pytest.mark.parametrize("b_trans", [False, True])
def test_a_dynamic_m_multiplies_only_its_valid_rows(rows, b_trans):
    # A decode step's single row in a 64-row tile: the product is bounded by the tile's valid rows
    # (tmatmul ... valid [rows, n]); a weight read as b^T ([N, K] in memory) loads in blocks.
    n, k = 200, 150
    w_shape = (n, k) if b_trans else (k, n)

    @pypto.jit
    def linear(x: pypto.Tensor((ROWS, k), pypto.DT_FP32), w: pypto.Tensor(w_shape, pypto.DT_FP32)):
        pypto.set_cube_tile_shapes([64, 64], [64, 64], [128, 128])
        return pypto.matmul(x, w, b_trans=b_trans)

    x, w = torch.randn(rows, k), torch.randn(*w_shape)
    want = x.double() @ (w.double().T if b_trans else w.double())
    torch.testing.assert_close(linear(x, w), want.float(), rtol=1e-4, atol=1e-4)
    pto = pypto.compile(linear, x, w).pto()
    assert re.search(r"tmatmul %\w+, %\w+ valid \[min\(64, \(ROWS - ", pto), pto
    assert re.search(r"tmatmul_acc %\w+, %\w+, %\w+ valid \[min\(64, \(ROWS - ", pto), pto


COLS = pypto.frontend.dynamic("COLS")


@pytest.mark.parametrize("cols", [1, 15, 16, 17, 33, 64, 100])
@pytest.mark.parametrize("panels", [False, True])
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-4), (torch.float16, 2e-2)])
def test_a_dynamic_n_multiplies_only_its_valid_columns(cols, panels, dtype, tol):
    # The tokens of a W @ x^T: N known at run time, in 64-column tiles (a last one partial, or one
    # partial tile only). The float product carries the valid columns and multiplies whole vectors
    # of them; k in two tiles accumulates (tmatmul_acc) into the same columns; b in column panels
    # (matmul_panels) or by rows; fp16 operands widen to float as they load.
    m, k = 72, 192

    @pypto.frontend.jit(pass_options={"matmul_panels": panels})
    def w_xt(w: pypto.Tensor((m, k), PT[dtype]), x: pypto.Tensor((k, COLS), PT[dtype])):
        pypto.set_cube_tile_shapes([32, 32], [96, 96], [64, 64])
        return pypto.matmul(w, x, out_dtype=pypto.DT_FP32)

    g = torch.Generator().manual_seed(cols)
    w, x = torch.randn(m, k, generator=g).to(dtype), torch.randn(k, cols, generator=g).to(dtype)
    got = w_xt(w, x)
    assert got.shape == (m, cols)
    torch.testing.assert_close(got, (w.double() @ x.double()).float(), rtol=tol, atol=tol)
    pto = pypto.compile(w_xt, w, x).pto()
    assert re.search(r"tmatmul %\w+, %\w+ valid \[[^\]]*, min\(64, \(COLS - ", pto), pto
    assert re.search(r"tmatmul_acc %\w+, %\w+, %\w+ valid \[[^\]]*, min\(64, \(COLS - ", pto), pto


@pytest.mark.parametrize("n", [16, 32, 48, 64, 80])
@pytest.mark.parametrize("m", [60, 61])
def test_products_of_few_columns_read_a_once_in_one_column_block(m, n):
    # Up to four vectors of columns run as one column block of all of them (a weight streamed once
    # in a W @ x^T), by register blocks of rows sized to the vector registers: 60 rows leave a last
    # partial register block whatever its size (6 or 8 rows), 61 a tile with 1 valid row past
    # the first; 80 columns are more than four vectors of any target (the general blocking). k in two
    # tiles accumulates into the same blocks.
    k = 256

    @pypto.frontend.jit
    def w_xt(w: pypto.Tensor((m, k), pypto.DT_FP32), x: pypto.Tensor((k, n), pypto.DT_FP32)):
        pypto.set_cube_tile_shapes([60, 60], [128, 128], [n, n])
        return pypto.matmul(w, x)

    g = torch.Generator().manual_seed(m * n)
    w, x = torch.randn(m, k, generator=g), torch.randn(k, n, generator=g)
    torch.testing.assert_close(w_xt(w, x), (w.double() @ x.double()).float(), rtol=1e-4, atol=1e-4)


def test_a_static_m_has_no_valid_rows_on_its_products():
    @pypto.jit
    def linear(x: pypto.Tensor((64, 96), pypto.DT_FP32), w: pypto.Tensor((96, 128), pypto.DT_FP32)):
        pypto.set_cube_tile_shapes([64, 64], [32, 32], [128, 128])
        return pypto.matmul(x, w)

    x, w = torch.randn(64, 96), torch.randn(96, 128)
    torch.testing.assert_close(linear(x, w), x @ w, rtol=1e-4, atol=1e-4)
    assert "valid" not in "".join(ln for ln in pypto.compile(linear, x, w).pto().splitlines() if "tmatmul" in ln)


@pytest.mark.parametrize("rows", [1, 3, 8])
def test_a_product_of_few_rows_reads_a_transposed_weight_as_it_lies(rows):
    # A decode step's x [rows, K] @ w^T with w [N, K] (nn.Linear's layout): w's tiles load as the
    # [N, K] rows they are in memory and multiply by dot products (tmatmul ... b_trans); K and N
    # leave tails of the vector and of the register blocks.
    n, k = 203, 150

    @pypto.jit
    def linear(x: pypto.Tensor((rows, k), pypto.DT_FP32), w: pypto.Tensor((n, k), pypto.DT_FP32)):
        pypto.set_cube_tile_shapes([8, 8], [64, 64], [32, 32])
        return pypto.matmul(x, w, b_trans=True)

    x, w = torch.randn(rows, k), torch.randn(n, k)
    torch.testing.assert_close(linear(x, w), (x.double() @ w.double().T).float(), rtol=1e-4, atol=1e-4)
    pto = pypto.compile(linear, x, w).pto()
    assert re.search(r"tmatmul %\w+, %\w+ b_trans", pto) and re.search(r"tmatmul_acc %\w+, %\w+, %\w+ b_trans", pto)
    # b is loaded from w itself as [32 rows of w, 64 of K] (the task's region: 32 whole rows of w):
    # no transposing load.
    assert re.search(r"tload %w\[0, 0\] valid \[min\(32, .*\), 64\] view : !pto.tile<32x64xf32>", pto), pto
    assert re.search(r"%w -> %w\[\(g1 \* 32\), 0; min\(32, \(203 - \(g1 \* 32\)\)\), 150\]", pto), pto


def test_more_rows_or_a_plain_b_keep_the_packed_product():
    @pypto.jit
    def linear(x: pypto.Tensor((9, 40), pypto.DT_FP32), w: pypto.Tensor((24, 40), pypto.DT_FP32),
               v: pypto.Tensor((40, 24), pypto.DT_FP32)):
        pypto.set_cube_tile_shapes([16, 16], [64, 64], [32, 32])
        return pypto.matmul(x, w, b_trans=True), pypto.matmul(pypto.view(x, [2, 40], [0, 0]), v)

    x, w, v = torch.randn(9, 40), torch.randn(24, 40), torch.randn(40, 24)
    a, b = linear(x, w, v)
    torch.testing.assert_close(a, x @ w.T, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(b, x[:2] @ v, rtol=1e-4, atol=1e-4)
    assert "b_trans" not in pypto.compile(linear, x, w, v).pto()


@pytest.mark.parametrize("rows", [1, 4])
def test_a_bf16_weight_of_a_few_row_product_is_read_in_bf16(rows):
    # bf16 x [rows, K] @ w^T, fp32 out: w's tiles stay bf16 ([32 rows of w, 64 of K], loaded as views
    # of w, no conversion) and the product widens them as it reads them; where the CPU has bf16 dot
    # products, x stays bf16 too and both are viewed with their row pitch (`view strided`).
    n, k = 75, 200

    @pypto.jit
    def linear(x: pypto.Tensor((rows, k), pypto.DT_BF16), w: pypto.Tensor((n, k), pypto.DT_BF16)):
        pypto.set_cube_tile_shapes([8, 8], [64, 64], [32, 32])
        return pypto.matmul(x, w, pypto.DT_FP32, b_trans=True)

    x, w = torch.randn(rows, k).bfloat16(), torch.randn(n, k).bfloat16()
    got = linear(x, w)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, (x.double() @ w.double().T).float(), rtol=1e-5, atol=1e-5)
    pto = pypto.compile(linear, x, w).pto()
    dot = bool(pypto._C.cpu_target_info(pypto.get_cpu_target())["bf16_dot_products"])
    view = "view strided" if dot else "view"
    assert re.search(rf"tload %w\[0, 0\] valid \[.*\] {view} : !pto.tile<32x64xbf16>", pto), pto
    assert re.search(rf"tload %x\[[^\n]*: !pto.tile<{rows}x64x{'bf16' if dot else 'f32'}>", pto), pto
    # With dot products the product carries its valid columns (n = 75 leaves a partial last tile).
    valid = r" valid \[1, min\(32, [^\n]*\)\]" if dot and rows == 1 else r" valid \[[^\n]*\]" if dot else ""
    assert re.search(rf"tmatmul %\w+, %\w+ b_trans{valid} : !pto.tile<\d+x32xf32>", pto), pto


CHUNKS = pypto.frontend.dynamic("CHUNKS")


@pytest.mark.parametrize("chunks", [8, 12, 3])
@pytest.mark.parametrize("dtype,tol", [(torch.float32, 1e-4), (torch.bfloat16, 2e-2)])
def test_tiny_batched_products_share_tasks_in_blocks_of_the_batch(chunks, dtype, tol):
    """A batch of small products (8 query rows against each head's and chunk's 64 x 64 matrix, 32K
    multiply-adds) runs 8 consecutive products per task (passes/util matmul_output_tile), over
    chunk counts that do and do not divide the block and a dynamic count, with an epilogue fused
    over the same grid."""

    @pypto.jit
    def f(a: pypto.Tensor((32, CHUNKS, 8, 64), PT[dtype]), b: pypto.Tensor((32, CHUNKS, 64, 64), PT[dtype])):
        pypto.set_cube_tile_shapes([8, 8], [64, 64], [64, 64])
        pypto.set_vec_tile_shapes(2, 2, 8, 64)
        return pypto.matmul(a, b, pypto.DT_FP32) * 2.0 + 1.0

    a, b = torch.randn(32, chunks, 8, 64).to(dtype), torch.randn(32, chunks, 64, 64).to(dtype)
    ref = (a.double() @ b.double()) * 2.0 + 1.0
    torch.testing.assert_close(f(a, b).double(), ref, atol=tol * 8, rtol=tol)
    compiled = pypto.compile(f, a, b)
    # One task per head and block of 8 chunks (the epilogue shares them), not one per product.
    assert compiled.stats()["tasks"] == 32 * -(-chunks // 8)
    passes = compiled.dump("passes")
    assert "batch block 8: 8 consecutive products of 8x64x64 per task" in passes
    assert "retiled to [1, 8, 8, 64] (the output tile of @matmul" in passes


def test_a_batch_too_small_for_blocks_keeps_one_product_per_task():
    # 4 products of 4096 multiply-adds: blocks would leave fewer than 16 tasks.
    a, b = torch.randn(4, 1, 64), torch.randn(4, 64, 64)
    f = mm_kernel((4, 1, 64), (4, 64, 64), pypto.DT_FP32, cube=([8, 8], [64, 64], [64, 64]))
    torch.testing.assert_close(f(a, b), a @ b, atol=1e-4, rtol=1e-4)
    compiled = pypto.compile(f, a, b)
    assert compiled.stats()["tasks"] == 4
    assert "batch block" not in compiled.dump("passes")


@pytest.mark.parametrize("batch", [150, 64, 5])
def test_one_row_products_of_a_dynamic_batch_take_64_a_task(batch):
    # 4096 multiply-adds a product: 64 of them make a task's 256K (the grid's size unknown at compile
    # time, no minimum task count applies); a last block of fewer products and a batch of 5.
    @pypto.jit
    def f(a: pypto.Tensor((CHUNKS, 1, 64), pypto.DT_FP32), b: pypto.Tensor((CHUNKS, 64, 64), pypto.DT_FP32)):
        pypto.set_cube_tile_shapes([8, 8], [64, 64], [64, 64])
        pypto.set_vec_tile_shapes(64, 1, 64)
        return pypto.matmul(a, b, pypto.DT_FP32) + 1.0

    a, b = torch.randn(batch, 1, 64), torch.randn(batch, 64, 64)
    torch.testing.assert_close(f(a, b), a @ b + 1.0, atol=1e-4, rtol=1e-4)
    compiled = pypto.compile(f, a, b)
    assert compiled.stats()["tasks"] == -(-batch // 64)
    assert "batch block 64: 64 consecutive products of 1x64x64 per task" in compiled.dump("passes")
