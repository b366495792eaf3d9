"""pypto.uniform_impl (PyPTO's 1-D stream entry): the counter's low word counter0 (a constant or a
symbolic scalar) shifts the stream by whole blocks, rounds=7 runs Philox4x32-7, checked bit for bit
against a NumPy Philox written here (itself checked on the authors' known answers), and
pypto.uniform is uniform_impl(k, 0, c1) reshaped."""

import numpy as np
import pytest
import torch

import pypto

M = 0xFFFFFFFF
BITS = {pypto.DT_FP32: 23, pypto.DT_FP16: 10, pypto.DT_BF16: 7}
TORCH = {pypto.DT_FP32: torch.float32, pypto.DT_FP16: torch.float16, pypto.DT_BF16: torch.bfloat16}


def philox(blocks: np.ndarray, counter1: int, key: int, rounds: int) -> np.ndarray:
    """Philox4x32-R of the counters (block as the low 64 bits, counter1 as the high 64): n x 4 words."""
    b = blocks.astype(np.uint64)
    x = [b & np.uint64(M), b >> np.uint64(32), np.full(b.shape, counter1 & M, np.uint64),
         np.full(b.shape, counter1 >> 32, np.uint64)]
    k0, k1 = key & M, key >> 32
    for _ in range(rounds):
        p0 = np.uint64(0xD2511F53) * x[0]
        p1 = np.uint64(0xCD9E8D57) * x[2]
        x = [((p1 >> np.uint64(32)) ^ x[1] ^ np.uint64(k0)) & np.uint64(M), p1 & np.uint64(M),
             ((p0 >> np.uint64(32)) ^ x[3] ^ np.uint64(k1)) & np.uint64(M), p0 & np.uint64(M)]
        k0, k1 = (k0 + 0x9E3779B9) & M, (k1 + 0xBB67AE85) & M
    return np.stack(x, axis=1).astype(np.uint32)


def test_the_reference_matches_the_known_answers():
    # Random123's kat_vectors for Philox4x32-7: counter words (c0..c3), key words (k0, k1).
    words = philox(np.array([0], np.uint64), 0, 0, 7)[0]
    assert [hex(w) for w in words] == ["0x5f6fb709", "0xd893f64", "0x4f121f81", "0x4f730a48"]
    words = philox(np.array([2 ** 64 - 1], np.uint64), 2 ** 64 - 1, 2 ** 64 - 1, 7)[0]
    assert [hex(w) for w in words] == ["0x5207ddc2", "0x45165e59", "0x4d8ee751", "0x8c52f662"]
    words = philox(np.array([0x85a308d3243f6a88], np.uint64), 0x0370734413198a2e, 0x299f31d0a4093822, 7)[0]
    assert [hex(w) for w in words] == ["0x4dfccaba", "0x190a87f0", "0xc47362ba", "0xb6b5242a"]


def reference(n, key, counter0, counter1, rounds, dtype):
    blocks = (np.uint64(counter0) + np.arange((n + 3) // 4, dtype=np.uint64))  # wraps modulo 2^64
    raw = philox(blocks, counter1, key, rounds).reshape(-1)[:n]
    bits = BITS[dtype]
    return torch.from_numpy((raw & np.uint32((1 << bits) - 1)).astype(np.float64) / (1 << bits)).to(TORCH[dtype])


def draw(key, counter0, counter1, n, rounds, dtype, tile=(64,)):
    @pypto.jit
    def f(x: pypto.Tensor((1,), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(*tile)
        return pypto.uniform_impl(key, counter0, counter1, [n], rounds=rounds, dtype=dtype)

    return f(torch.zeros(1))


@pytest.mark.parametrize("rounds", [7, 10])
@pytest.mark.parametrize("dtype", [pypto.DT_FP32, pypto.DT_FP16, pypto.DT_BF16])
def test_bit_for_bit_against_numpy(rounds, dtype):
    for key, c0, c1, n, tile in ((12345678901234, 0, 0, 1000, (64,)), (2 ** 64 - 1, 2 ** 64 - 3, 2 ** 63 + 5, 77, (16,)),
                                 (7, 123456789, 42, 333, (100,))):
        got = draw(key, c0, c1, n, rounds, dtype, tile)
        assert got.dtype == TORCH[dtype] and tuple(got.shape) == (n,)
        assert torch.equal(got, reference(n, key, c0, c1, rounds, dtype)), (key, c0, c1, n)


def test_uniform_is_uniform_impl_with_counter0_zero_reshaped():
    @pypto.jit
    def f(x: pypto.Tensor((1,), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 8)
        a = pypto.uniform([6, 10], [99], [3, 17], [1], pypto.DT_FP32)
        pypto.set_vec_tile_shapes(64)
        b = pypto.uniform_impl(99, 0, 17, [60])
        return a, b

    a, b = f(torch.zeros(1))
    assert torch.equal(a.reshape(-1), b)


def test_a_symbolic_counter0_steps_the_stream_per_loop_iteration():
    @pypto.jit
    def f(out: pypto.Tensor([pypto.DYNAMIC, 40], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(16)
        for i in pypto.loop(out.shape[0]):
            r = pypto.uniform_impl(5, i * 10 + out.shape[0], 9, [40], rounds=7)
            out[i:i + 1, :] = pypto.reshape(r, [1, 40])

    for rows in (1, 4):
        out = torch.zeros(rows, 40)
        f(out)
        for i in range(rows):
            assert torch.equal(out[i], reference(40, 5, i * 10 + rows, 9, 7, pypto.DT_FP32)), (rows, i)


AT = r"pypto.uniform_impl at .*test_uniform_impl.py:\d+: "  # the op and the user's line


def test_errors_name_the_op_the_argument_and_the_value():
    def run(**kw):
        args = dict(key=1, counter0=0, counter1=0, shape=[8], rounds=10, dtype=None)
        args.update(kw)

        @pypto.jit
        def f(x: pypto.Tensor((1,), pypto.DT_FP32)):
            pypto.set_vec_tile_shapes(8)
            return pypto.uniform_impl(args["key"], args["counter0"], args["counter1"], args["shape"],
                                      rounds=args["rounds"], dtype=args["dtype"])

        f(torch.zeros(1))

    with pytest.raises(pypto.UserError, match=AT + r"shape must be 1-dimensional, found \[2, 4\]"):
        run(shape=[2, 4])
    with pytest.raises(pypto.UserError, match=AT + r"rounds must be 7 or 10, found 8"):
        run(rounds=8)
    with pytest.raises(TypeError, match=AT + r"dtype must be DT_FP32, DT_FP16 or DT_BF16, found 'DT_INT32'"):
        run(dtype=pypto.DT_INT32)
    with pytest.raises(TypeError, match=AT + r"counter0 must be an int or a symbolic scalar, found float"):
        run(counter0=1.5)
    with pytest.raises(pypto.UserError, match=AT + r"key must be in \[0, 2\*\*64\), found -1"):
        run(key=-1)
    with pytest.raises(pypto.UserError, match=AT + r"counter0 must be in \[0, 2\*\*64\), found 18446744073709551616"):
        run(counter0=2 ** 64)
