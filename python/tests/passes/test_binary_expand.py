"""binary_expand end to end: a ranged orchestration loop whose body passes a view built from the
loop variable. The pass renames the variable in each block; the view has to follow (it used to keep
the old name, which the host compiler then refused)."""

import numpy as np
import pytest

import pypto.pto as pto

PROGRAM = """\
// Function Type: InCore
func @k(%a: !pto.memref<gm,8x8,f32>, %o: !pto.memref<gm,8x8,f32> out) {
  %t = alloc_tile : !pto.tile<8x8xf32>
  %t = tload %a[0, 0] valid [8, 8] : !pto.tile<8x8xf32>
  %t = tadds %t, 1 : !pto.tile<8x8xf32>
  tstore %t, %o[0, 0] valid [8, 8]
  return
}

// Function Type: Orchestration
func @main(%x: !pto.memref<gm,(rows)x8,f32>, %y: !pto.memref<gm,(rows)x8,f32> out, %rows: index, %n: index) {
  %v = view %x[(i * 8), 0] dims [0, 1] steps [1, 1] : !pto.memref<gm,8x8,f32>
  %w = view %v[0, 0] dims [0, 1] steps [1, 1] : !pto.memref<gm,8x8,f32>
  FOR %i:idx, 0:idx, n:idx, 1:idx max_range=8 min_range=2
    CALL @k(%a -> %w, %o -> %y[(i * 8), 0; 8, 8])
  ENDFOR
  return
}
"""


@pytest.mark.parametrize("n", [0, 1, 2, 3, 7, 8, 9, 16, 21])
def test_a_view_of_the_loop_variable_follows_each_expanded_block(n):
    prog = pto.compile(PROGRAM)
    rows = 8 * max(n, 1)
    x = np.random.default_rng(n).standard_normal((rows, 8)).astype(np.float32)
    y = np.zeros_like(x)
    prog(x, y, n)
    expect = np.zeros_like(x)
    expect[:8 * n] = x[:8 * n] + 1
    np.testing.assert_array_equal(y, expect)
    # The expanded orchestration has no ranged loop left; each block passes its own copy of the views.
    expanded = prog.dump("execution")
    assert "max_range" not in expanded
    for block in ("i_8", "i_4", "i_2", "i_r"):
        assert f"%a -> %w_{block}[0, 0; 8, 8]" in expanded and f"view of %v_{block} at" in expanded
