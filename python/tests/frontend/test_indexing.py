"""index_select, index_add(_), index_put_, scatter_, scatter_update, one_hot and gathermask against
torch (the op families issue, item 4)."""

import pytest
import torch

import pypto

D = pypto.DYNAMIC
DTYPES = {torch.float32: pypto.DT_FP32, torch.float16: pypto.DT_FP16, torch.bfloat16: pypto.DT_BF16,
          torch.int32: pypto.DT_INT32, torch.int8: pypto.DT_INT8, torch.int64: pypto.DT_INT64}


def _data(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return torch.randn(*shape, generator=g).to(dtype)
    return torch.randint(-50, 50, shape, generator=g, dtype=dtype)


# ---------------------------------------------------------------- index_select

@pytest.mark.parametrize("dim", [0, 1, 2, -1])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int8])
def test_index_select_every_dim_and_dtype(dim, dtype):
    x = _data((9, 13, 6), dtype)  # no dim divides the tile
    idx = torch.randint(0, x.shape[dim], (11,), generator=torch.Generator().manual_seed(dim % 3), dtype=torch.int32)
    dt = DTYPES[dtype]

    @pypto.jit
    def f(x: pypto.Tensor((D, 13, 6), dt), i: pypto.Tensor((D,), pypto.DT_INT32)):
        pypto.set_vec_tile_shapes(4, 8, 4)
        return pypto.index_select(x, dim, i), x.index_select(dim, i)

    a, b = f(x, idx)
    assert torch.equal(a, torch.index_select(x, dim, idx))
    assert torch.equal(b, a)
    # another dynamic size of both the data and the index: the same kernel
    x2 = _data((4, 13, 6), dtype, seed=3)
    idx2 = torch.randint(0, x2.shape[dim], (3,), dtype=torch.int32)
    assert torch.equal(f(x2, idx2)[0], torch.index_select(x2, dim, idx2))


def test_index_select_with_a_2d_index_replaces_the_dim_by_two():
    x = torch.randn(5, 9, 4)
    idx = torch.randint(0, 9, (2, 3))

    @pypto.jit
    def f(x: pypto.Tensor((5, 9, 4), pypto.DT_FP32), i: pypto.Tensor((2, 3), pypto.DT_INT64)):
        pypto.set_vec_tile_shapes(2, 4, 4)
        return pypto.index_select(x, 1, i)

    got = f(x, idx)
    assert list(got.shape) == [5, 2, 3, 4]
    assert torch.equal(got, x[:, idx])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("dim", [0, 1])
def test_a_vec_tile_of_the_results_rank_tiles_a_2d_index_select_by_merged_index_dims(dim, dtype):
    """With a 2-D index the result has one more dim than the input: a vec tile of the result's rank
    tiles the gather with the index's two tile entries merged (2 x 4 rows of 32 become 8 x 32), not
    cut to its first entries (2 x 4: one task per 4 columns)."""
    x = _data((20, 70) if dim == 0 else (7, 20), dtype)
    idx = torch.randint(0, x.shape[dim], (6, 5), generator=torch.Generator().manual_seed(1), dtype=torch.int32)
    dt = DTYPES[dtype]
    tile = (2, 4, 32) if dim == 0 else (4, 2, 4)

    @pypto.jit
    def f(x: pypto.Tensor(tuple(x.shape), dt), i: pypto.Tensor((6, 5), pypto.DT_INT32)):
        pypto.set_vec_tile_shapes(*tile)
        return pypto.index_select(x, dim, i) * 1

    gather = [line for line in f.compile(x, idx).dump("tensor").splitlines() if "= gather(" in line]
    assert len(gather) == 1 and ("tile [8, 32]" if dim == 0 else "tile [4, 8]") in gather[0], gather
    want = x[idx] if dim == 0 else x[:, idx]
    assert torch.equal(f(x, idx), want)


def test_index_select_fuses_with_its_neighbours():
    x, idx = torch.randn(16, 32), torch.tensor([3, 3, 0, 15, 7])

    @pypto.jit
    def f(x: pypto.Tensor((16, 32), pypto.DT_FP32), i: pypto.Tensor((5,), pypto.DT_INT64)):
        pypto.set_vec_tile_shapes(8, 16)
        return pypto.exp(pypto.index_select(x * 2.0, 0, i)) + 1.0

    torch.testing.assert_close(f(x, idx), torch.exp(torch.index_select(x * 2.0, 0, idx)) + 1.0)


def test_index_select_out_of_range_is_a_task_error_naming_the_op():
    @pypto.jit
    def f(x: pypto.Tensor((4, 5), pypto.DT_FP32), i: pypto.Tensor((3,), pypto.DT_INT32)):
        pypto.set_vec_tile_shapes(4, 4)
        return pypto.index_select(x, 1, i)

    with pytest.raises(pypto.TaskError, match=r"index 5 on axis 1 is outside \[0, 5\).*pypto\.index_select at "
                                              r".*test_indexing\.py:\d+"):
        f(torch.randn(4, 5), torch.tensor([0, 5, 1], dtype=torch.int32))
    with pytest.raises(pypto.TaskError, match="index -1"):
        f(torch.randn(4, 5), torch.tensor([0, -1, 1], dtype=torch.int32))


def test_index_select_argument_errors():
    @pypto.jit
    def bad_dtype(x: pypto.Tensor((4, 5), pypto.DT_FP32), i: pypto.Tensor((3,), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 4)
        return pypto.index_select(x, 1, i)

    with pytest.raises(TypeError, match=r"pypto\.index_select at .*test_indexing\.py:\d+: index must be DT_INT32 or "
                                        r"DT_INT64, found DT_FP32"):
        bad_dtype(torch.randn(4, 5), torch.zeros(3))

    @pypto.jit
    def bad_dim(x: pypto.Tensor((4, 5), pypto.DT_FP32), i: pypto.Tensor((3,), pypto.DT_INT32)):
        pypto.set_vec_tile_shapes(4, 4)
        return pypto.index_select(x, 2, i)

    with pytest.raises(ValueError, match=r"pypto\.index_select at .*: dim 2 is out of range for a tensor of rank 2 "
                                         r"\(expected -2 to 1\)"):
        bad_dim(torch.randn(4, 5), torch.zeros(3, dtype=torch.int32))

    @pypto.jit
    def bad_rank(x: pypto.Tensor((4, 5), pypto.DT_FP32), i: pypto.Tensor((1, 2, 3), pypto.DT_INT32)):
        pypto.set_vec_tile_shapes(4, 4)
        return pypto.index_select(x, 0, i)

    with pytest.raises(ValueError, match=r"index must have 1 or 2 dims, found shape \[1, 2, 3\]"):
        bad_rank(torch.randn(4, 5), torch.zeros(1, 2, 3, dtype=torch.int32))


# ---------------------------------------------------------------- index_add

def _index_add_in_order(x, dim, index, source, alpha):
    """index_add in float64, adding source slices one by one in index order."""
    out = x.double().clone()
    for i, k in enumerate(index.tolist()):
        out.select(dim, k).add_(source.double().select(dim, i) * alpha)
    return out


@pytest.mark.parametrize("dim", [0, 1, 2])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int32])
def test_index_add_accumulates_duplicates_in_index_order(dim, dtype):
    x = _data((7, 10, 5), dtype)
    n = 13  # more entries than the dim: duplicates, across tiles
    shape = list(x.shape)
    shape[dim] = n
    source = _data(shape, dtype, seed=1)
    index = torch.randint(0, x.shape[dim], (n,), generator=torch.Generator().manual_seed(2))
    alpha = 3 if dtype == torch.int32 else 0.5
    dt = DTYPES[dtype]

    @pypto.jit
    def f(x: pypto.Tensor((7, 10, 5), dt), i: pypto.Tensor((D,), pypto.DT_INT64), s: pypto.Tensor(shape, dt)):
        pypto.set_vec_tile_shapes(4, 4, 4)
        return pypto.index_add(x, dim, i, s, alpha=alpha)

    got = f(x, index, source)
    if dtype == torch.int32 or dtype == torch.float32:
        torch.testing.assert_close(got, torch.index_add(x, dim, index, source, alpha=alpha))
    else:  # each addition rounds to the storage type, in index order
        torch.testing.assert_close(got.double(), _index_add_in_order(x, dim, index, source, alpha), rtol=3e-2,
                                   atol=3e-2)
    assert torch.equal(got, f(x, index, source))  # deterministic


def test_index_add_in_place_writes_the_callers_tensor_and_orders_later_reads():
    x = torch.randn(12, 33)
    source, index = torch.randn(20, 33), torch.randint(0, 12, (20,))
    ref = x.clone().index_add_(0, index, source, alpha=-2.0)

    @pypto.jit
    def f(x: pypto.Tensor((12, 33), pypto.DT_FP32), i: pypto.Tensor((20,), pypto.DT_INT64),
          s: pypto.Tensor((20, 33), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 16)
        y = pypto.index_add_(x, 0, i, s, alpha=-2.0)
        return y * 2.0  # reads x after the scatter

    twice = f(x, index, source)
    torch.testing.assert_close(x, ref)
    torch.testing.assert_close(twice, ref * 2.0)


def test_index_add_numpy_arrays():
    np = pytest.importorskip("numpy")
    x, s = np.ones((6, 4), np.float32), np.full((3, 4), 2.0, np.float32)
    idx = np.array([5, 0, 5], np.int64)

    @pypto.jit
    def f(x: pypto.Tensor((6, 4), pypto.DT_FP32), i: pypto.Tensor((3,), pypto.DT_INT64),
          s: pypto.Tensor((3, 4), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 4)
        return pypto.index_add(x, 0, i, s)

    want = x.copy()
    np.add.at(want, idx, s)
    np.testing.assert_array_equal(f(x, idx, s), want)


def test_index_add_errors():
    def build(src_shape, alpha=1, idx_shape=(3,), dtype=pypto.DT_FP32):
        @pypto.jit
        def f(x: pypto.Tensor((6, 4), pypto.DT_FP32), i: pypto.Tensor(idx_shape, pypto.DT_INT64),
              s: pypto.Tensor(src_shape, dtype)):
            pypto.set_vec_tile_shapes(4, 4)
            return pypto.index_add(x, 0, i, s, alpha=alpha)
        return f

    x = torch.zeros(6, 4)
    with pytest.raises(ValueError, match=r"pypto\.index_add at .*: index has 3 entries but source has 2 in dim 0"):
        build((2, 4))(x, torch.zeros(3, dtype=torch.int64), torch.zeros(2, 4))
    with pytest.raises(ValueError, match=r"source of shape \[3, 5\] must match the input of shape \[6, 4\] outside "
                                         r"dim 0 \(dim 1: 5 versus 4\)"):
        build((3, 5))(x, torch.zeros(3, dtype=torch.int64), torch.zeros(3, 5))
    with pytest.raises(ValueError, match=r"index must have 1 dim, found shape \[3, 1\]"):
        build((3, 4), idx_shape=(3, 1))(x, torch.zeros(3, 1, dtype=torch.int64), torch.zeros(3, 4))
    with pytest.raises(TypeError, match=r"source must have the input's dtype DT_FP32, found DT_FP16"):
        build((3, 4), dtype=pypto.DT_FP16)(x, torch.zeros(3, dtype=torch.int64), torch.zeros(3, 4).half())
    with pytest.raises(TypeError, match=r"alpha must be a number, found str"):
        build((3, 4), alpha="2")(x, torch.zeros(3, dtype=torch.int64), torch.zeros(3, 4))

    @pypto.jit
    def g(x: pypto.Tensor((6, 4), pypto.DT_INT32), i: pypto.Tensor((3,), pypto.DT_INT64),
          s: pypto.Tensor((3, 4), pypto.DT_INT32)):
        pypto.set_vec_tile_shapes(4, 4)
        return pypto.index_add(x, 0, i, s, alpha=0.5)

    with pytest.raises(TypeError, match=r"alpha must be an int for the integer input dtype DT_INT32, found 0.5"):
        g(torch.zeros(6, 4, dtype=torch.int32), torch.zeros(3, dtype=torch.int64), torch.zeros(3, 4, dtype=torch.int32))
    with pytest.raises(pypto.TaskError, match=r"index 6 on axis 0 is outside \[0, 6\).*pypto\.index_add at"):
        build((3, 4))(x, torch.tensor([0, 6, 1]), torch.zeros(3, 4))


# ---------------------------------------------------------------- index_put_

@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("accumulate", [False, True])
def test_index_put_against_torch(k, accumulate):
    x = torch.randn(8, 9, 5)
    n = 7
    g = torch.Generator().manual_seed(k)
    if accumulate:  # duplicates add up
        inds = tuple(torch.randint(-x.shape[j], x.shape[j], (n,), generator=g) for j in range(k))
    else:  # distinct positions: torch leaves the order of duplicate writes open
        flat = torch.randperm(int(torch.tensor(x.shape[:k]).prod()), generator=g)[:n]
        inds, rest = [], flat
        for j in reversed(range(k)):
            inds.insert(0, rest % x.shape[j] - (x.shape[j] if j == 0 else 0))  # negative indices in dim 0
            rest = rest // x.shape[j]
        inds = tuple(inds)
    vshape = [n] + list(x.shape[k:])
    values = torch.randn(*vshape)

    @pypto.jit
    def f(x: pypto.Tensor((8, 9, 5), pypto.DT_FP32), a: pypto.Tensor((n,), pypto.DT_INT64),
          b: pypto.Tensor((n,), pypto.DT_INT32), c: pypto.Tensor((n,), pypto.DT_INT64), v: pypto.Tensor(vshape, pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 4, 4)
        assert pypto.index_put_(x, (a, b, c)[:k], v, accumulate) is None

    pad = list(inds) + [torch.zeros(n, dtype=torch.int64)] * (3 - k)
    got = x.clone()
    f(got, pad[0], pad[1].int(), pad[2], values)
    torch.testing.assert_close(got, x.clone().index_put_(inds, values, accumulate=accumulate))


def test_index_put_out_of_range_and_argument_errors():
    @pypto.jit
    def f(x: pypto.Tensor((4, 5), pypto.DT_FP32), a: pypto.Tensor((2,), pypto.DT_INT64),
          b: pypto.Tensor((2,), pypto.DT_INT64), v: pypto.Tensor((2,), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 4)
        pypto.index_put_(x, (a, b), v)

    x = torch.zeros(4, 5)
    with pytest.raises(pypto.TaskError, match=r"pypto\.index_put_ at .*test_indexing\.py:\d+"):
        f(x, torch.tensor([0, 1]), torch.tensor([3, 5]), torch.ones(2))  # 5 is outside dim 1, though row 1*5+5 is not
    assert torch.equal(x[0], torch.tensor([0.0, 0, 0, 1, 0]))  # the valid one was written

    @pypto.jit
    def one(x: pypto.Tensor((4, 5), pypto.DT_FP32), a: pypto.Tensor((2,), pypto.DT_INT64),
            v: pypto.Tensor((2, 5), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 4)
        pypto.index_put_(x, (a,), v)

    with pytest.raises(pypto.TaskError, match=r"index -5 on axis 0.*pypto\.index_put_"):  # the user's value
        one(torch.zeros(4, 5), torch.tensor([0, -5]), torch.ones(2, 5))

    def build(vshape, indices=lambda a, b: (a,), acc=False):
        @pypto.jit
        def g(x: pypto.Tensor((4, 5), pypto.DT_FP32), a: pypto.Tensor((2,), pypto.DT_INT64),
              b: pypto.Tensor((3,), pypto.DT_INT64), v: pypto.Tensor(vshape, pypto.DT_FP32)):
            pypto.set_vec_tile_shapes(4, 4)
            pypto.index_put_(x, indices(a, b), v, acc)
        return lambda: g(torch.zeros(4, 5), torch.zeros(2, dtype=torch.int64), torch.zeros(3, dtype=torch.int64),
                         torch.zeros(*vshape))

    with pytest.raises(ValueError, match=r"values of shape \[2, 4\] must have the shape \[2, 5\] \(dim 1: 4 versus 5\)"):
        build((2, 4))()
    with pytest.raises(ValueError, match=r"values of shape \[2\] must have the shape \[2, 5\]"):
        build((2,))()
    with pytest.raises(ValueError, match=r"indices\[1\] has 3 entries but indices\[0\] has 2"):
        build((2,), lambda a, b: (a, b))()
    with pytest.raises(ValueError, match=r"indices holds 3 tensors; expected 1 to 2"):
        build((2,), lambda a, b: (a, a, a))()
    with pytest.raises(TypeError, match=r"indices must be a tuple of 1-D index tensors, found Tensor"):
        build((2, 5), lambda a, b: a)()
    with pytest.raises(TypeError, match=r"accumulate must be a bool, found int 1"):
        build((2, 5), acc=1)()


# ---------------------------------------------------------------- scatter_, scatter_update

def test_scatter_in_place_with_a_larger_src_a_number_and_reduce():
    x = torch.randn(5, 9)
    index = torch.stack([torch.randperm(9, generator=torch.Generator().manual_seed(r))[:4] for r in range(3)])
    src = torch.randn(4, 6)  # larger than index in both dims: its leading part is read

    @pypto.jit
    def f(x: pypto.Tensor((5, 9), pypto.DT_FP32), i: pypto.Tensor((3, 4), pypto.DT_INT64),
          s: pypto.Tensor((4, 6), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(2, 4)
        r = pypto.scatter_(x, 1, i, s)
        assert x.scatter_(1, i, 2.5, reduce="multiply") is r is x

    got = x.clone()
    ref = x.clone().scatter_(1, index, src[:3, :4])
    ref = ref.scatter_reduce(1, index, torch.full((3, 4), 2.5), "prod")
    f(got, index, src)
    torch.testing.assert_close(got, ref)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32])
def test_scatter_update_2d_and_4d_paged_caches(dtype):
    dt = DTYPES[dtype]
    cache = torch.zeros(16, 8, dtype=dtype)
    index = torch.tensor([[1, 2], [4, 5], [9, 15]])
    src = _data((6, 8), dtype)

    @pypto.jit
    def two(c: pypto.Tensor((16, 8), dt), i: pypto.Tensor((3, 2), pypto.DT_INT64), s: pypto.Tensor((6, 8), dt)):
        pypto.set_vec_tile_shapes(4, 8)
        c = pypto.scatter_update(c, -2, i, s)  # noqa: F841 - PyPTO's in-place spelling

    ref = cache.clone()
    ref[index.flatten()] = src
    two(cache, index, src)
    assert torch.equal(cache, ref)

    blocks = torch.zeros(3, 4, 1, 5, dtype=dtype)  # 3 blocks of 4 slots
    slots = torch.tensor([[1, 8], [4, 11], [0, 6]])
    src4 = _data((3, 2, 1, 5), dtype, seed=2)

    @pypto.jit
    def four(c: pypto.Tensor((3, 4, 1, 5), dt), i: pypto.Tensor((3, 2), pypto.DT_INT32),
             s: pypto.Tensor((3, 2, 1, 5), dt)):
        pypto.set_vec_tile_shapes(2, 2, 1, 8)
        return c.scatter_update(-2, i, s) * 1

    out = four(blocks, slots.int(), src4)
    ref4 = torch.zeros(12, 1, 5, dtype=dtype)
    ref4[slots.flatten()] = src4.reshape(6, 1, 5)
    assert torch.equal(blocks, ref4.reshape(3, 4, 1, 5))
    assert torch.equal(out, blocks)


def test_scatter_update_errors():
    def build(ishape, sshape, dim=-2):
        @pypto.jit
        def f(c: pypto.Tensor(ishape, pypto.DT_FP32), i: pypto.Tensor((2, 2), pypto.DT_INT64),
              s: pypto.Tensor(sshape, pypto.DT_FP32)):
            pypto.set_vec_tile_shapes(4, 8)
            pypto.scatter_update(c, dim, i, s)
        return lambda: f(torch.zeros(*ishape), torch.zeros(2, 2, dtype=torch.int64), torch.zeros(*sshape))

    with pytest.raises(ValueError, match=r"pypto\.scatter_update at .*: dim must be -2, found 0"):
        build((8, 4), (4, 4), dim=0)()
    with pytest.raises(ValueError, match=r"the input must have 2 dims .* or 4 dims .*, found shape \[2, 4, 4\]"):
        build((2, 4, 4), (4, 4))()
    with pytest.raises(ValueError, match=r"src of shape \[3, 4\] must have the shape \[4, 4\]"):
        build((8, 4), (3, 4))()


# ---------------------------------------------------------------- one_hot, gathermask

@pytest.mark.parametrize("dtype", [torch.int32, torch.int64, torch.int8, torch.int16])
@pytest.mark.parametrize("shape", [(9,), (3, 5), (2, 3, 4)])
def test_one_hot_against_torch(dtype, shape):
    labels = torch.randint(0, 6, shape, generator=torch.Generator().manual_seed(len(shape)), dtype=dtype)
    dt = {torch.int32: pypto.DT_INT32, torch.int64: pypto.DT_INT64, torch.int8: pypto.DT_INT8,
          torch.int16: pypto.DT_INT16}[dtype]

    @pypto.jit
    def f(x: pypto.Tensor(shape, dt)):
        pypto.set_vec_tile_shapes(*([2] * len(shape)), 8)
        return pypto.one_hot(x, 6)

    got = f(labels)
    assert got.dtype == torch.int64
    assert torch.equal(got, torch.nn.functional.one_hot(labels.long(), 6))


def test_one_hot_errors():
    @pypto.jit
    def f(x: pypto.Tensor((4,), pypto.DT_INT32)):
        pypto.set_vec_tile_shapes(4, 4)
        return pypto.one_hot(x, 3)

    with pytest.raises(pypto.TaskError, match=r"index 3 on axis 1 is outside \[0, 3\).*pypto\.one_hot at"):
        f(torch.tensor([0, 1, 3, 2], dtype=torch.int32))

    @pypto.jit
    def g(x: pypto.Tensor((4,), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 4)
        return pypto.one_hot(x, 3)

    with pytest.raises(TypeError, match=r"pypto\.one_hot at .*: expects an integer tensor, found DT_FP32"):
        g(torch.zeros(4))

    @pypto.jit
    def h(x: pypto.Tensor((4,), pypto.DT_INT32)):
        pypto.set_vec_tile_shapes(4, 4)
        return pypto.one_hot(x, 0)

    with pytest.raises(ValueError, match=r"num_classes must be >= 1, found 0"):
        h(torch.zeros(4, dtype=torch.int32))


@pytest.mark.parametrize("mode,step,first", [(1, 2, 0), (2, 2, 1), (3, 4, 0), (4, 4, 1), (5, 4, 2), (6, 4, 3),
                                             (7, 1, 0)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.int32])
def test_gathermask_patterns(mode, step, first, dtype):
    x = _data((5, 24), dtype)
    dt = DTYPES[dtype]

    @pypto.jit
    def f(x: pypto.Tensor((D, 24), dt)):
        pypto.set_vec_tile_shapes(4, 8)
        return pypto.gathermask(x, mode), x.gathermask(mode) + 0

    a, b = f(x)
    assert torch.equal(a, x[:, first::step])
    assert torch.equal(b, a)


def test_gathermask_errors():
    def build(mode, n=8):
        @pypto.jit
        def f(x: pypto.Tensor((2, n), pypto.DT_FP32)):
            pypto.set_vec_tile_shapes(2, 8)
            return pypto.gathermask(x, mode)
        return lambda: f(torch.zeros(2, n))

    with pytest.raises(ValueError, match=r"pypto\.gathermask at .*: pattern_mode must be 1 to 7, found 0"):
        build(0)()
    with pytest.raises(ValueError, match=r"pattern_mode 3 takes one of every 4 elements; the last dim 6 is not a "
                                         r"multiple of 4"):
        build(3, 6)()
    with pytest.raises(TypeError, match=r"pattern_mode must be an int, found float 1.0"):
        build(1.0)()
