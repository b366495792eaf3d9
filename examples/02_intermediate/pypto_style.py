"""PyPTO's own idioms, running unchanged: a kernel written as a `with pypto.function(...)` block
on tensors declared with pypto.tensor (no decorator, no return), pypto.from_torch, a local
tensor created inside a jitted kernel, offset-style slice assignment (`out[b:, ...] = t`),
`if pypto.cond(...)` with a tensor that the branches compute differently, and
pypto.loop_unroll."""

import torch

import pypto

ROWS, COLS = 40, 48


def block_style():
    """A kernel as a with-block: the block's ops are traced on `x` and `out` and compiled when
    the block ends; pypto.get_last_function() runs it on torch tensors."""
    n = pypto.SymbolicScalar("n")                      # a dynamic row count shared by both
    x = pypto.tensor([n, COLS], pypto.DT_FP32, "x")
    out = pypto.tensor([n, COLS], pypto.DT_FP32, "out")
    with pypto.function("SCALED_EXP", x, out):
        pypto.set_vec_tile_shapes(8, 16)
        out.move(pypto.exp(x) * 0.5)
    fn = pypto.get_last_function()
    for rows in (3, ROWS):
        a = torch.randn(rows, COLS)
        o = torch.zeros(rows, COLS)
        fn(pypto.from_torch(a, "a", dynamic_axis=[0]), o)
        err = (o - torch.exp(a) * 0.5).abs().max().item()
        assert err < 1e-5, err
        print(f"with pypto.function, {rows:2d} rows: max error {err:.1e}")


@pypto.frontend.jit
def clipped_rows(x: pypto.Tensor([ROWS, COLS], pypto.DT_FP32), out: pypto.Tensor([ROWS, COLS], pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(8, 16)
    acc = pypto.tensor([8, COLS], pypto.DT_FP32)        # a local tensor, zero-filled
    for i, unroll in pypto.loop_unroll(0, ROWS // 8, 1, unroll_list=[2]):
        for k in range(unroll):                          # the body handles `unroll` blocks
            row = (i + k) * 8
            blk = x[row:row + 8, :]
            if pypto.cond(pypto.is_loop_begin(i)):
                y = blk * 2.0                            # the branches compute y differently ...
            else:
                y = pypto.exp(blk)
            acc[:] = y + acc                             # ... and y has one value after the if
            out[row:, ...] = acc                         # written at the offset `row`


def jit_style():
    x = torch.randn(ROWS, COLS) * 0.1
    out = torch.zeros(ROWS, COLS)
    clipped_rows(x, out)
    blocks, acc = [], torch.zeros(8, COLS)
    for b in range(ROWS // 8):
        # loop_unroll runs blocks 0-3 in a loop of step 2 and block 4 in a loop of step 1;
        # is_loop_begin holds on the first iteration of each: blocks 0, 1 and 4
        y = x[b * 8:(b + 1) * 8] * 2.0 if b in (0, 1, 4) else torch.exp(x[b * 8:(b + 1) * 8])
        acc = y + acc
        blocks.append(acc)
    ref = torch.cat(blocks)
    err = (out - ref).abs().max().item()
    assert err < 1e-4, err
    print(f"local tensor, loop_unroll and a merged if-value: max error {err:.1e}")


if __name__ == "__main__":
    block_style()
    jit_style()
