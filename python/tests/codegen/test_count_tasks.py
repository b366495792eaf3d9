"""stats()["tasks"] and count_tasks run the generated entry in the runtime's build mode: the count
is the number of tasks a real call submits, under loops, conditions and binary-expanded dynamic
loops, for every value of the symbolic dims."""

import numpy as np
import pytest

import pypto

N = pypto.frontend.dynamic("N")


@pypto.jit
def _loop_and_cond(x: pypto.Tensor([N, 32], pypto.DT_FP32), out: pypto.Tensor([N, 32], pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(8, 32)
    rows = x.shape[0]
    for i in pypto.loop(0, pypto.ceildiv(rows, 8), 1, idx_name="blk"):
        valid = (rows - i * 8).min(8)
        xb = pypto.view(x, [8, 32], [i * 8, 0], valid_shape=[valid, 32])
        if i % 2 == 0:
            pypto.assemble(pypto.exp(xb), [i * 8, 0], out)
        else:
            pypto.assemble(pypto.relu(pypto.exp(xb)), [i * 8, 0], out)


@pytest.mark.parametrize("rows", [1, 8, 9, 40, 77])
def test_the_count_is_what_a_call_submits(rows):
    x = np.random.default_rng(rows).standard_normal((rows, 32)).astype(np.float32)
    out = np.zeros_like(x)
    compiled = pypto.compile(_loop_and_cond, x, out)
    expected = compiled.stats()["tasks"]
    _loop_and_cond(x, out)
    assert compiled._last_tasks == expected
    ref = np.exp(x)
    ref[np.repeat(np.arange(-(-rows // 8)) % 2 == 1, 8)[:rows]] = np.maximum(ref, 0)[
        np.repeat(np.arange(-(-rows // 8)) % 2 == 1, 8)[:rows]]
    np.testing.assert_allclose(out, ref, rtol=1e-6)
    assert expected >= -(-rows // 8)
