"""pypto.torch.custom_op: jitted kernels as torch.library custom ops, inside eager, torch.compile
(fullgraph) and torch.export programs (issue 22, point 5)."""

import subprocess
import sys

import pytest
import torch

import pypto

M = pypto.frontend.dynamic("M")


@pypto.frontend.jit
def rms_norm_op(x: pypto.Tensor((M, 96), pypto.DT_FP32), w: pypto.Tensor((96,), pypto.DT_FP32)) \
        -> pypto.Tensor((M, 96), pypto.DT_FP32):
    pypto.set_vec_tile_shapes(8, 96)
    return pypto.rms_norm(x, w, 1e-5)


@pypto.frontend.jit
def split_scale(x: pypto.Tensor((M, 64), pypto.DT_FP32), factor=2.0) -> tuple[pypto.Tensor(), pypto.Tensor()]:
    # The results' shapes are not in the annotation: the fake implementation compiles to learn them.
    pypto.set_vec_tile_shapes(8, 64)
    doubled = pypto.concat([x, x], 0) * factor
    return doubled, pypto.sum(x, -1, True)


class Block(torch.nn.Module):
    def __init__(self, op):
        super().__init__()
        self.op = op
        self.w = torch.nn.Parameter(torch.rand(96) + 0.5)
        self.lin = torch.nn.Linear(96, 40)

    def forward(self, x):
        return torch.relu(self.lin(self.op(x * 2, self.w)))


def reference(block, x):
    return torch.relu(block.lin(torch.nn.functional.rms_norm(x * 2, (96,), block.w, 1e-5)))


@pytest.fixture(scope="module")
def rms_op():
    return pypto.torch.custom_op(rms_norm_op)


def test_the_op_runs_the_kernel_in_eager_torch(rms_op):
    assert str(rms_op).endswith("pypto::rms_norm_op)>")
    x, w = torch.randn(37, 96), torch.rand(96) + 0.5
    torch.testing.assert_close(torch.ops.pypto.rms_norm_op(x, w), torch.nn.functional.rms_norm(x, (96,), w, 1e-5))
    torch.testing.assert_close(rms_op(x, w), torch.nn.functional.rms_norm(x, (96,), w, 1e-5))


def test_a_model_calling_the_op_compiles_with_fullgraph(rms_op):
    block = Block(rms_op).requires_grad_(False)
    compiled = torch.compile(block, fullgraph=True)  # a graph break would raise
    for rows in (16, 50):
        x = torch.randn(rows, 96)
        torch.testing.assert_close(compiled(x), reference(block, x))


def test_a_model_calling_the_op_exports_with_a_dynamic_dim(rms_op):
    block = Block(rms_op).requires_grad_(False)
    x = torch.randn(24, 96)
    ep = torch.export.export(block, (x,), dynamic_shapes={"x": {0: torch.export.Dim("rows")}})
    targets = [str(n.target) for n in ep.graph.nodes if n.op == "call_function"]
    assert "pypto.rms_norm_op.default" in targets, targets
    for rows in (24, 71):
        x = torch.randn(rows, 96)
        torch.testing.assert_close(ep.module()(x), reference(block, x))


def test_results_without_annotated_shapes_and_a_constant_parameter():
    op = pypto.torch.custom_op(split_scale)
    x = torch.randn(13, 64)
    doubled, sums = op(x)
    torch.testing.assert_close(doubled, torch.cat([x, x]) * 2)
    torch.testing.assert_close(sums, x.sum(-1, keepdim=True), rtol=1e-5, atol=1e-5)
    tripled, _ = op(x, 3.0)
    torch.testing.assert_close(tripled, torch.cat([x, x]) * 3)

    def model(x):
        a, b = op(x)
        return a[: x.shape[0]] - b

    torch.testing.assert_close(torch.compile(model, fullgraph=True)(x), x * 2 - x.sum(-1, keepdim=True),
                               rtol=1e-5, atol=1e-5)


def test_registering_again_returns_the_same_op_and_names_are_checked(rms_op):
    assert pypto.torch.custom_op(rms_norm_op) is rms_op
    renamed = pypto.torch.custom_op(name="rms_norm_renamed")(rms_norm_op)
    x, w = torch.randn(5, 96), torch.rand(96) + 0.5
    torch.testing.assert_close(torch.ops.pypto.rms_norm_renamed(x, w), rms_op(x, w))
    with pytest.raises(pypto.UserError, match="'pypto::rms_norm_renamed' is already registered"):
        pypto.torch.custom_op(split_scale, name="rms_norm_renamed")
    with pytest.raises(pypto.UserError, match="name must be a Python identifier, found 'a-b'"):
        pypto.torch.custom_op(split_scale, name="a-b")


def test_what_cannot_be_an_op_is_a_clear_error():
    with pytest.raises(pypto.UserTypeError, match="fn must be a @pypto.frontend.jit function, found function"):
        pypto.torch.custom_op(lambda x: x)

    @pypto.frontend.jit
    def no_return(x: pypto.Tensor((M, 8), pypto.DT_FP32)):
        return pypto.exp(x)

    with pytest.raises(pypto.NotSupportedError, match=r"custom_op\(no_return\): the function needs a return annotation"):
        pypto.torch.custom_op(no_return)

    @pypto.frontend.jit
    def opaque_constant(x: pypto.Tensor((M, 8), pypto.DT_FP32), table) -> pypto.Tensor((M, 8), pypto.DT_FP32):
        return x * table[0]

    with pytest.raises(pypto.NotSupportedError, match="parameter 'table' is not annotated as a pypto.Tensor"):
        pypto.torch.custom_op(opaque_constant)


def test_import_pypto_does_not_import_torch_and_pypto_torch_loads_on_use():
    code = ("import sys, pypto; assert 'torch' not in sys.modules, 'torch imported'; "
            "f = pypto.torch.custom_op; assert 'torch' in sys.modules; print(f.__module__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "pypto.torch"
    with pytest.raises(AttributeError, match="module 'pypto' has no attribute 'no_such_name'"):
        pypto.no_such_name  # noqa: B018


@pypto.frontend.jit
def append_row(row: pypto.Tensor((1, 32), pypto.DT_FP32), cache: pypto.Tensor((M, 32), pypto.DT_FP32)) \
        -> pypto.Tensor((1, 1), pypto.DT_FP32):
    # Writes `row` into the last row of `cache` (a KV cache's append) and returns the row's sum.
    pypto.set_vec_tile_shapes(1, 32)
    pypto.assemble(row * 2, [cache.shape[0] - 1, 0], cache)
    return pypto.sum(row, -1, True)


def test_an_op_that_writes_into_a_parameter_declares_it():
    op = pypto.torch.custom_op(append_row, mutates_args=("cache",))
    assert "Tensor(a1!) cache" in str(op._opoverload._schema)

    def model(row, cache):
        total = op(row, cache)
        return cache.sum() + total[0, 0]

    cache, row = torch.zeros(6, 32), torch.randn(1, 32)
    compiled = torch.compile(model, fullgraph=True)
    got = compiled(row, cache)
    assert torch.equal(cache[-1], row[0] * 2) and torch.count_nonzero(cache[:-1]) == 0
    torch.testing.assert_close(got, row.sum() * 3, rtol=1e-5, atol=1e-5)
    with pytest.raises(pypto.UserError, match="mutates_args names 'kv', which is not a tensor parameter"):
        pypto.torch.custom_op(append_row, name="append_row_2", mutates_args=("kv",))
    with pytest.raises(pypto.UserTypeError, match="mutates_args must be a tuple of parameter names"):
        pypto.torch.custom_op(append_row, name="append_row_3", mutates_args="cache")
