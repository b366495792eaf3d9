"""The 4-bit storage types: DT_INT4, DT_FP4_E2M1, DT_FP4_E1M2 and the pair types DT_FP4_E2M1X2 /
DT_FP4_E1M2X2, and the reserved DT_HF4.

Arrays carry the 4-bit types packed two per byte (the first element in the low nibble): a
parameter's uint8 array has half the kernel's last dim, a 4-bit result comes back that way. The
references decode and encode with tables written here from the formats' definitions."""

import numpy as np
import pytest
import torch

import pypto

E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
E1M2 = [0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75]
FP4 = {pypto.DT_FP4_E2M1: E2M1, pypto.DT_FP4_E1M2: E1M2}


def _decode(codes: np.ndarray, dt) -> np.ndarray:
    if dt == pypto.DT_INT4:
        return np.where(codes >= 8, codes.astype(np.int32) - 16, codes).astype(np.float32)
    mags = np.array(FP4[dt], dtype=np.float32)[codes & 7]
    return np.where(codes & 8, -mags, mags).astype(np.float32)


def _encode_fp4(x: np.ndarray, dt) -> np.ndarray:
    """Nearest value, ties to the even code, saturating; NaN to the largest value."""
    mags = np.array(FP4[dt], dtype=np.float64)
    out = np.empty(x.shape, dtype=np.uint8)
    for i, v in np.ndenumerate(x.astype(np.float64)):
        sign = 8 if np.signbit(v) else 0
        a = abs(v)
        if np.isnan(a) or a >= mags[-1]:
            out[i] = sign | 7
            continue
        err = np.abs(mags - a)
        best = np.flatnonzero(err == err.min())
        k = best[0] if len(best) == 1 else [b for b in best if b % 2 == 0][0]
        out[i] = sign | k
    return out


def _pack(codes: np.ndarray) -> np.ndarray:
    return (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)


def _unpack(packed: np.ndarray) -> np.ndarray:
    return np.stack([packed & 15, packed >> 4], -1).reshape(*packed.shape[:-1], packed.shape[-1] * 2)


@pytest.mark.parametrize("dt", [pypto.DT_FP4_E2M1, pypto.DT_FP4_E1M2, pypto.DT_INT4])
@pytest.mark.parametrize("shape", [(8, 32), (5, 22)])  # the tile (4, 16) does and does not divide it
def test_packed_parameter_decodes_every_code(dt, shape):
    rows, cols = shape

    @pypto.frontend.jit
    def decode(x: pypto.Tensor([], dt)) -> pypto.Tensor([], pypto.DT_FP32):
        assert x.dtype == dt and x.shape[-1] == cols  # the kernel sees the unpacked last dim
        pypto.set_vec_tile_shapes(4, 16)
        return pypto.cast(x, pypto.DT_FP32)

    rng = np.random.default_rng(0)
    packed = rng.integers(0, 256, (rows, cols // 2), dtype=np.uint8)
    packed.flat[:16] = np.arange(16) * 17  # every code in both nibbles
    out = decode(torch.from_numpy(packed))
    np.testing.assert_array_equal(out.numpy(), _decode(_unpack(packed), dt))
    assert np.array_equal(np.signbit(out.numpy()), np.signbit(_decode(_unpack(packed), dt)))  # -0.0 stays


@pytest.mark.parametrize("dt", [pypto.DT_FP4_E2M1, pypto.DT_FP4_E1M2])
def test_fp4_encoding_rounds_to_nearest_even_and_saturates(dt):
    mags = FP4[dt]
    mids = [(a + b) / 2 for a, b in zip(mags, mags[1:])]
    vals = mags + mids + [m + 1e-3 for m in mids] + [m - 1e-3 for m in mids] + [mags[-1] * 3, np.inf, np.nan, 1e-30]
    x = np.array(vals + [-v for v in vals], dtype=np.float32)
    x = np.concatenate([x, np.zeros(64 - x.size % 64 if x.size % 64 else 0, np.float32)]).reshape(-1, 32)

    @pypto.frontend.jit
    def encode(a: pypto.Tensor([pypto.DYNAMIC, 32], pypto.DT_FP32)) -> pypto.Tensor([pypto.DYNAMIC, 32], dt):
        pypto.set_vec_tile_shapes(8, 16)
        return pypto.cast(a, dt)

    got = encode(x)
    assert got.dtype == np.uint8 and got.shape == (x.shape[0], 16)
    np.testing.assert_array_equal(_unpack(got), _encode_fp4(x, dt))


@pytest.mark.parametrize("rows", [3, 9])  # dynamic rows
def test_int4_wraps_and_round_trips(rows):
    @pypto.frontend.jit
    def roundtrip(a: pypto.Tensor([pypto.DYNAMIC, 20], pypto.DT_INT32)) -> pypto.Tensor([pypto.DYNAMIC, 20], pypto.DT_INT32):
        pypto.set_vec_tile_shapes(4, 16)
        return pypto.cast(pypto.cast(a, pypto.DT_INT4), pypto.DT_INT32)

    a = torch.randint(-40, 40, (rows, 20), dtype=torch.int32)
    want = ((a + 8) % 16) - 8  # two's complement wrap to 4 bits
    assert torch.equal(roundtrip(a), want)


def test_int4_saturating_cast_and_int8_carrier():
    @pypto.frontend.jit
    def sat(a: pypto.Tensor((4, 16), pypto.DT_FP32)) -> pypto.Tensor((4, 16), pypto.DT_INT4):
        pypto.set_vec_tile_shapes(4, 16)
        return pypto.cast(a, pypto.DT_INT4, satmode=pypto.SaturationMode.ON)

    @pypto.frontend.jit
    def widen(x: pypto.Tensor((4, 16), pypto.DT_INT4)) -> pypto.Tensor((4, 16), pypto.DT_FP16):
        pypto.set_vec_tile_shapes(4, 16)
        return pypto.cast(x, pypto.DT_FP16)

    a = torch.linspace(-20, 20, 64).reshape(4, 16)
    packed = sat(a)
    want = a.trunc().clamp(-8, 7)
    assert torch.equal(widen(packed).float(), want)
    assert torch.equal(widen(packed.view(torch.int8)).float(), want)  # an int8 array carries INT4 too


@pytest.mark.parametrize("dt", [pypto.DT_FP4_E2M1, pypto.DT_INT4])
def test_arithmetic_rounds_each_result(dt):
    @pypto.frontend.jit
    def f(x: pypto.Tensor([], dt), y: pypto.Tensor([], dt)) -> pypto.Tensor([], dt):
        pypto.set_vec_tile_shapes(4, 16)
        return pypto.add(x, y)

    rng = np.random.default_rng(1)
    px, py = (rng.integers(0, 256, (6, 9), dtype=np.uint8) for _ in range(2))
    s = _decode(_unpack(px), dt) + _decode(_unpack(py), dt)
    if dt == pypto.DT_INT4:
        want = (s.astype(np.int64) & 15).astype(np.uint8)
    else:
        want = _encode_fp4(s, dt)
    np.testing.assert_array_equal(_unpack(f(px, py)), want)


def test_view_packs_and_unpacks_bytes():
    @pypto.frontend.jit
    def unpack(x: pypto.Tensor((pypto.DYNAMIC, 12), pypto.DT_UINT8)) -> pypto.Tensor((pypto.DYNAMIC, 24), pypto.DT_FP32):
        pypto.set_vec_tile_shapes(2, 8)
        return pypto.cast(pypto.view(x, dtype=pypto.DT_FP4_E2M1), pypto.DT_FP32)

    @pypto.frontend.jit
    def repack(x: pypto.Tensor((pypto.DYNAMIC, 24), pypto.DT_FP32)) -> pypto.Tensor((pypto.DYNAMIC, 12), pypto.DT_UINT8):
        pypto.set_vec_tile_shapes(2, 8)
        return pypto.view(pypto.cast(x, pypto.DT_FP4_E2M1), dtype=pypto.DT_UINT8)

    b = np.random.default_rng(2).integers(0, 256, (5, 12), dtype=np.uint8)
    vals = unpack(b)
    np.testing.assert_array_equal(vals, _decode(_unpack(b), pypto.DT_FP4_E2M1))
    np.testing.assert_array_equal(repack(vals), b)


def test_pair_type_moves_and_reads_as_fp4():
    @pypto.frontend.jit
    def read(x: pypto.Tensor((4, 8), pypto.DT_FP4_E2M1X2)) -> pypto.Tensor((4, 16), pypto.DT_FP32):
        pypto.set_vec_tile_shapes(4, 16)
        return pypto.cast(pypto.view(x, dtype=pypto.DT_FP4_E2M1), pypto.DT_FP32)

    b = np.random.default_rng(3).integers(0, 256, (4, 8), dtype=np.uint8)
    np.testing.assert_array_equal(read(b), _decode(_unpack(b), pypto.DT_FP4_E2M1))
    if hasattr(torch, "float4_e2m1fn_x2"):
        t = torch.from_numpy(b).view(torch.float4_e2m1fn_x2)
        np.testing.assert_array_equal(read(pypto.from_torch(t.view(torch.uint8), dtype=pypto.DT_FP4_E2M1X2)),
                                      _decode(_unpack(b), pypto.DT_FP4_E2M1))


def test_pair_type_cannot_be_computed_on():
    @pypto.frontend.jit
    def bad(x: pypto.Tensor((4, 8), pypto.DT_FP4_E2M1X2)) -> pypto.Tensor((4, 8), pypto.DT_FP32):
        pypto.set_vec_tile_shapes(4, 16)
        return pypto.cast(x, pypto.DT_FP32)

    with pytest.raises(TypeError, match=r"cast.*DT_FP4_E2M1X2.*two 4-bit values.*DT_FP4_E2M1"):
        bad(np.zeros((4, 8), np.uint8))


def test_errors():
    with pytest.raises(pypto.NotSupportedError, match="DT_HF4"):
        pypto.bytes_of(pypto.DT_HF4)
    assert pypto.bytes_of(pypto.DT_INT4) == 1 and pypto.bytes_of(pypto.DT_FP4_E2M1X2) == 1  # as PyPTO

    @pypto.frontend.jit
    def odd(x: pypto.Tensor((2, 7), pypto.DT_FP32)) -> pypto.Tensor((2, 7), pypto.DT_FP4_E2M1):
        pypto.set_vec_tile_shapes(2, 8)
        return pypto.cast(x, pypto.DT_FP4_E2M1)

    with pytest.raises(ValueError, match="even last dim, found 7"):
        odd(np.zeros((2, 7), np.float32))

    x = pypto.tensor((4, 7), pypto.DT_INT4, "x")
    with pytest.raises(ValueError, match=r"pypto.function 'odd_block': 4-bit tensor 'x' \(DT_INT4\) needs an even "
                                         r"last dim, found 7"):
        with pypto.function("odd_block", x):
            pass


@pytest.mark.parametrize("cols", [16, 22])  # the tile (2, 8) does and does not divide
def test_dynamic_last_dim_of_a_packed_parameter(cols):
    @pypto.frontend.jit
    def widen(x: pypto.Tensor((pypto.DYNAMIC, pypto.DYNAMIC), pypto.DT_INT4)) -> \
            pypto.Tensor((pypto.DYNAMIC, pypto.DYNAMIC), pypto.DT_INT32):
        pypto.set_vec_tile_shapes(2, 8)
        return pypto.cast(x, pypto.DT_INT32) * 3

    rng = np.random.default_rng(cols)
    for rows in (3, 4):
        packed = rng.integers(0, 256, (rows, cols // 2), dtype=np.uint8)
        got = widen(packed)
        assert got.shape == (rows, cols)
        np.testing.assert_array_equal(got, _decode(_unpack(packed), pypto.DT_INT4).astype(np.int32) * 3)


@pytest.mark.parametrize("dt", [pypto.DT_INT4, pypto.DT_FP4_E2M1])
@pytest.mark.parametrize("cols", [16, 20])
def test_writing_into_a_packed_parameter_packs_into_the_callers_bytes(dt, cols):
    @pypto.frontend.jit
    def update(x: pypto.Tensor((4, cols), pypto.DT_FP32), out: pypto.Tensor((4, cols), dt)):
        pypto.set_vec_tile_shapes(2, 8)
        head = pypto.view(out, [2, cols], [0, 0])
        out[2:, :] = pypto.cast(pypto.view(x, [2, cols], [2, 0]), dt)  # the last two rows: x, converted
        out[0:2, :] = pypto.cast(pypto.cast(head, pypto.DT_FP32) * 2, dt)  # the first two: doubled in place

    rng = np.random.default_rng(cols)
    x = rng.uniform(-3, 3, (4, cols)).astype(np.float32)
    if dt == pypto.DT_INT4:
        x = np.round(x)
    out = rng.integers(0, 256, (4, cols // 2), dtype=np.uint8)
    old = _decode(_unpack(out), dt)
    update(x, out)
    want_codes = np.concatenate([_to_codes(old[:2] * 2, dt), _to_codes(x[2:], dt)])
    np.testing.assert_array_equal(_unpack(out), want_codes)


def _to_codes(v: np.ndarray, dt) -> np.ndarray:
    if dt == pypto.DT_INT4:
        return (v.astype(np.int64) & 15).astype(np.uint8)  # wraps to the low 4 bits
    return _encode_fp4(v, dt)


def test_function_block_with_4_bit_tensors():
    x = pypto.tensor((3, 12), pypto.DT_FP4_E2M1, "x")
    y = pypto.tensor((3, 12), pypto.DT_INT4, "y")
    out = pypto.tensor((3, 12), pypto.DT_FP32, "out")
    with pypto.function("fp4_block", x, y, out) as fn:
        pypto.set_vec_tile_shapes(2, 8)
        out[:] = pypto.cast(x, pypto.DT_FP32) + pypto.cast(y, pypto.DT_FP32)
        y[:] = pypto.cast(pypto.cast(y, pypto.DT_FP32) + 1, pypto.DT_INT4)  # written back packed
    rng = np.random.default_rng(1)
    xp = rng.integers(0, 256, (3, 6), dtype=np.uint8)
    yp = rng.integers(0, 256, (3, 6), dtype=np.uint8)
    yv = _decode(_unpack(yp), pypto.DT_INT4)
    o = np.zeros((3, 12), np.float32)
    fn(xp, yp, o)
    np.testing.assert_array_equal(o, _decode(_unpack(xp), pypto.DT_FP4_E2M1) + yv)
    np.testing.assert_array_equal(_unpack(yp), _to_codes(yv + 1, pypto.DT_INT4))
