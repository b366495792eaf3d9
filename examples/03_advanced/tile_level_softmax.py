"""A softmax written at the tile level: InCore functions built with
PTOFunctionBuilder (one per step, as in PTO's dynamic softmax) and an
orchestration loop over the row tiles that turns each call into a task.

The loop is binary-expanded (max_range/min_range) and uses 32-row variants
of the kernels for the power-of-two blocks (tile_levels), 16-row ones for
the residual."""

import numpy as np
import torch

import pypto.pto as pto
from pypto.pto import ElementType, MemorySpace, PTOFunctionBuilder, PTOModule

COLS = 128
F32 = ElementType.F32


def row_kernels(module, rows, suffix=""):
    """rowmax, rowexpandsub + exp, rowsum, rowexpanddiv over a rows x COLS tile."""
    (PTOFunctionBuilder("rowmax" + suffix, module=module).in_core()
        .memref("x", MemorySpace.GLOBAL, F32).memref("m", MemorySpace.GLOBAL, F32)
        .tile("t", rows, COLS, F32).tile("r", rows, 1, F32)
        .load("t", "x").rowmax("r", "t").store("r", "m").build())
    (PTOFunctionBuilder("shift_exp" + suffix, module=module).in_core()
        .memref("x", MemorySpace.GLOBAL, F32).memref("m", MemorySpace.GLOBAL, F32)
        .memref("e", MemorySpace.GLOBAL, F32)
        .tile("t", rows, COLS, F32).tile("r", rows, 1, F32).tile("d", rows, COLS, F32).tile("y", rows, COLS, F32)
        .load("t", "x").load("r", "m").rowexpandsub("d", "t", "r").exp("y", "d").store("y", "e").build())
    (PTOFunctionBuilder("rowsum" + suffix, module=module).in_core()
        .memref("e", MemorySpace.GLOBAL, F32).memref("s", MemorySpace.GLOBAL, F32)
        .tile("t", rows, COLS, F32).tile("r", rows, 1, F32)
        .load("t", "e").rowsum("r", "t").store("r", "s").build())
    (PTOFunctionBuilder("normalize" + suffix, module=module).in_core()
        .memref("e", MemorySpace.GLOBAL, F32).memref("s", MemorySpace.GLOBAL, F32)
        .memref("y", MemorySpace.GLOBAL, F32)
        .tile("t", rows, COLS, F32).tile("r", rows, 1, F32).tile("o", rows, COLS, F32)
        .load("t", "e").load("r", "s").rowexpanddiv("o", "t", "r").store("o", "y").build())


module = PTOModule("tile_softmax")
row_kernels(module, 16)
row_kernels(module, 32, "_32")
(PTOFunctionBuilder("softmax", module=module).not_in_core()
    .memref("x", MemorySpace.GLOBAL, F32).memref("y", MemorySpace.GLOBAL, F32)
    .memref("row_max", MemorySpace.GLOBAL, F32).memref("exps", MemorySpace.GLOBAL, F32)
    .memref("row_sum", MemorySpace.GLOBAL, F32)
    .scalar("num_tiles", ElementType.I32)
    .for_loop("i", 0, "num_tiles", 1, max_range=1024, min_range=8, tile_levels={1024: 32, 512: 32, 256: 32, 128: 32,
                                                                               64: 32, 32: 32, 16: 32, 8: 32, 0: 16})
        .call("rowmax", {"x": ("x", "i", 0), "m": ("row_max", "i", 0)})
        .call("shift_exp", {"x": ("x", "i", 0), "m": ("row_max", "i", 0), "e": ("exps", "i", 0)})
        .call("rowsum", {"e": ("exps", "i", 0), "s": ("row_sum", "i", 0)})
        .call("normalize", {"e": ("exps", "i", 0), "s": ("row_sum", "i", 0), "y": ("y", "i", 0)})
    .end_for()
    .build())

program = pto.compile(module)
print(program.pto()[program.pto().index("orchestration func"):])

for num_tiles in (1, 5, 37):
    rows = 16 * num_tiles
    x = torch.randn(rows, COLS)
    y, m, e, s = torch.empty(rows, COLS), torch.empty(rows, 1), torch.empty(rows, COLS), torch.empty(rows, 1)
    program(x, y, m, e, s, num_tiles)
    torch.testing.assert_close(y, torch.softmax(x, -1), atol=1e-5, rtol=1e-5)
    print(f"num_tiles={num_tiles}: {program.stats()['tasks']} tasks, matches torch.softmax")

# The same program on NumPy arrays, by keyword.
xn = np.random.default_rng(0).standard_normal((48, COLS)).astype(np.float32)
yn = np.empty_like(xn)
program(x=xn, y=yn, row_max=np.empty((48, 1), np.float32), exps=np.empty_like(xn),
        row_sum=np.empty((48, 1), np.float32), num_tiles=3)
ref = np.exp(xn - xn.max(-1, keepdims=True))
np.testing.assert_allclose(yn, ref / ref.sum(-1, keepdims=True), atol=1e-5, rtol=1e-5)
print("NumPy arrays: matches")
