"""Data movement: pad a ragged batch of rows to a common width with -inf so that a softmax
ignores the padding, fill the part of a tensor past its valid shape (fillpad), and split a
stream of complex numbers stored as (re, im) pairs into its real and imaginary parts
(deinterleave) and back (interleave). Each result is checked against torch."""

import math

import torch

import pypto

ROWS, WIDTH, PADDED = 6, 50, 64


@pypto.frontend.jit
def padded_softmax(x: pypto.Tensor((ROWS, WIDTH), pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(8, PADDED)
    wide = pypto.pad(x, (0, PADDED - WIDTH), value=float("-inf"))  # right-pad the last dim
    return pypto.softmax(wide, -1)


@pypto.frontend.jit
def complex_parts(z: pypto.Tensor((ROWS, 2 * WIDTH), pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(8, 2 * WIDTH)
    re, im = pypto.deinterleave(z)                 # even and odd elements of each row
    mag = pypto.sqrt(re * re + im * im)
    lo, hi = pypto.interleave(re, -im)             # the conjugate, as (re, im) pairs again
    return mag, pypto.concat([lo, hi], -1)


@pypto.frontend.jit
def fill_tail(x: pypto.Tensor((ROWS, WIDTH), pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(8, 64)
    valid = pypto.view(x, [ROWS, WIDTH], [0, 0], valid_shape=[4, 30])  # only a 4 x 30 corner holds data
    return pypto.fillpad(valid, "constant", 0.0)


def main():
    torch.manual_seed(0)
    x = torch.randn(ROWS, WIDTH)
    probs = padded_softmax(x)
    torch.testing.assert_close(probs, torch.softmax(torch.nn.functional.pad(x, (0, PADDED - WIDTH), value=-math.inf), -1))

    z = torch.randn(ROWS, 2 * WIDTH)
    mag, conj = complex_parts(z)
    c = torch.view_as_complex(z.reshape(ROWS, WIDTH, 2))
    torch.testing.assert_close(mag, c.abs())
    assert torch.equal(conj, torch.view_as_real(c.conj().resolve_conj()).reshape(ROWS, 2 * WIDTH))

    want = torch.zeros(ROWS, WIDTH)
    want[:4, :30] = x[:4, :30]
    assert torch.equal(fill_tail(x), want)
    print("pad, fillpad, interleave and deinterleave match torch")


if __name__ == "__main__":
    main()
