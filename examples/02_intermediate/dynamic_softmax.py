"""Softmax over a dynamic batch: the row count is pypto.DYNAMIC, so the kernel
is compiled to C++ once and runs for every batch size. A pypto.loop walks
blocks of rows; the last block is a tail whose valid extent comes from
pypto.view(..., valid_shape=...), and each block is written into the output
parameter with pypto.assemble."""

import os

import torch

import pypto

N = 96          # the softmax dim (static)
BLOCK = 16      # rows per loop iteration


@pypto.frontend.jit
def softmax_rows(x: pypto.Tensor([pypto.DYNAMIC, N], pypto.DT_FP32),
                 out: pypto.Tensor([pypto.DYNAMIC, N], pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(BLOCK, 32)
    rows = x.shape[0]                                     # a symbolic scalar
    for b in pypto.loop(0, pypto.ceildiv(rows, BLOCK), 1, idx_name="blk"):
        valid = (rows - b * BLOCK).min(BLOCK)             # BLOCK, except in the tail block
        xb = pypto.view(x, [BLOCK, N], [b * BLOCK, 0], valid_shape=[valid, N])
        pypto.assemble(pypto.softmax(xb, -1), [b * BLOCK, 0], out)


def main():
    libraries = set()
    for batch in (5, 37, 130):
        x, out = torch.randn(batch, N), torch.zeros(batch, N)
        softmax_rows(x, out)
        err = (out - torch.softmax(x, -1)).abs().max().item()
        assert err < 1e-5, f"batch {batch}: softmax differs from torch.softmax by {err}"
        stats = pypto.compile(softmax_rows, x, out).stats()
        libraries.add(stats["library"])
        print(f"batch {batch:3d}: max |pypto - torch.softmax| = {err:.1e}, "
              f"{pypto.ceildiv(batch, BLOCK)} loop iterations, tasks {stats['tasks']}, cache {stats['cache']}")
    assert len(softmax_rows._cache) == 1, softmax_rows._cache   # one specialisation for every batch size
    assert len(libraries) == 1                                  # ... and one built library
    print(f"one compiled kernel for all batch sizes: {os.path.basename(libraries.pop())}")


if __name__ == "__main__":
    main()
