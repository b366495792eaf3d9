"""The C++ emitter names every .pto name so that it is an identifier colliding with nothing the
kernel declares: a tile may be called `%0`, `%arena`, `%int` or `%valid` (all used to fail in the
host compiler), in a fused chain or in single instructions."""

import numpy as np
import pytest

import pypto.pto as pto

PROGRAM = """\
// Function Type: InCore
func @k(%a: !pto.memref<gm,8x8,f32>, %o: !pto.memref<gm,8x8,f32> out) {
  %0 = alloc_tile : !pto.tile<8x8xf32>
  %arena = alloc_tile : !pto.tile<8x8xf32>
  %int = alloc_tile : !pto.tile<8x8xf32>
  %valid = alloc_tile : !pto.tile<8x8xf32>
  %0 = tload %a[0, 0] valid [8, 8] : !pto.tile<8x8xf32>
  %arena = tmuls %0, 2 : !pto.tile<8x8xf32>
  %int = tadds %arena, 1 : !pto.tile<8x8xf32>
  %valid = texp %int : !pto.tile<8x8xf32>
  tstore %valid, %o[0, 0] valid [8, 8]
  return
}

// Function Type: Orchestration
func @main(%x: !pto.memref<gm,8x8,f32>, %y: !pto.memref<gm,8x8,f32> out) {
  CALL @k(%a -> %x, %o -> %y)
  return
}
"""


@pytest.mark.parametrize("names", [
    {},
    {"%0": "%int8_t", "%arena": "%t_0", "%int": "%float", "%valid": "%args"},
    {"%0": "%_fs0", "%arena": "%_fr", "%int": "%pto", "%valid": "%return"},
])
def test_tiles_named_like_cxx_keywords_numbers_or_kernel_locals_compile_and_run(names):
    text = PROGRAM
    for old, new in names.items():
        text = text.replace(old + " ", new + " ").replace(old + ",", new + ",").replace(old + "\n", new + "\n")
    x = np.random.default_rng(1).standard_normal((8, 8)).astype(np.float32)
    y = np.zeros_like(x)
    prog = pto.compile(text)
    prog(x, y)
    np.testing.assert_allclose(y, np.exp(2 * x + 1), rtol=2e-6)
    tiles = [names.get(n, n)[1:] for n in ("%0", "%arena", "%int", "%valid")]
    kernel = prog.source().split("k_k(")[1]
    for name in tiles:
        assert f"t_{name}" in kernel, name
