"""The verifier's rules on .pto programs that parse: each broken rule is a VerifyError naming the
instruction, the tiles and what was expected, where the program used to fail in the host compiler
(or with an internal error). The unbroken program compiles and runs."""

import numpy as np
import pytest

import pypto
import pypto.pto

PROGRAM = """\
// Function Type: InCore
func @k(%a: !pto.memref<gm,8x8,f32>, %o: !pto.memref<gm,8x8,f32> out, %n: index) {
  %t = alloc_tile : !pto.tile<8x8xf32>
  %c = alloc_tile : !pto.tile<8x8xi32>
  %i = alloc_tile : !pto.tile<8x8xi32>
  %r = alloc_tile : !pto.tile<8x1xf32>
  %t = tload %a[0, 0] valid [8, 8] : !pto.tile<8x8xf32>
  %c = tcmpgt %t, %t : !pto.tile<8x8xi32>
  %t = tselect %c, %t, %t : !pto.tile<8x8xf32>
  %r = trowmax %t valid [8, 8] : !pto.tile<8x1xf32>
  %t = trowexpandsub %t, %r : !pto.tile<8x8xf32>
  %t = tadds %t, (n // 2) : !pto.tile<8x8xf32>
  tstore %t, %o[0, 0] valid [8, 8]
  return
}

// Function Type: Orchestration
func @main(%x: !pto.memref<gm,8x8,f32>, %y: !pto.memref<gm,8x8,f32> out, %m: index) {
  CALL @k(%a -> %x, %o -> %y[0, 0; 8, 8], %n -> m)
  return
}
"""


def test_the_unbroken_program_runs():
    x = np.random.default_rng(0).standard_normal((8, 8)).astype(np.float32)
    y = np.zeros_like(x)
    pypto.pto.compile(PROGRAM)(x, y, 6)
    np.testing.assert_allclose(y, x - x.max(axis=1, keepdims=True) + 3, rtol=1e-6)


@pytest.mark.parametrize("old, new, message", [
    ("%t = tselect %c,", "%t = tselect %t,",
     "[instr.dtype] tselect: the condition tile %t is f32; it must be i32"),
    ("%r = trowmax %t", "%r = trowmax %c",
     "[instr.dtype] trowmax: tile %r is f32 but tile %c is i32"),
    ("%t = trowexpandsub %t, %r : !pto.tile<8x8xf32>",
     "%t = trowexpandsub %t, %r : !pto.tile<8x8xf32>\n  %i = tadd %c, %t : !pto.tile<8x8xi32>",
     "[instr.dtype] tadd: tile %c is i32 but tile %t is f32"),
    ("%t = tselect %c,", "%i = tcmpgt %t, %c : !pto.tile<8x8xi32>\n  %t = tselect %c,",
     "[instr.dtype] tcmpgt: tile %t is f32 but tile %c is i32"),
    ("%t = trowexpandsub %t, %r", "%t = trowexpandsub %c, %r",
     "[instr.dtype] trowexpandsub: tile %t is f32 but tile %c is i32"),
    ("%r = trowmax %t valid [8, 8]", "%r = tredmax %t axis=10 valid [8, 8]",
     "[instr.axis] tredmax: axis=10 is not a dim of the source tile (rank 2)"),
    ("(n // 2)", "(n // (3 - 3))", "[expr.zero-divisor] tadd: the divisor (3 - 3) of (n // (3 - 3)) is 0"),
    ("%y[0, 0; 8, 8]", "%y[0, 0; (8 // 0), 8]", "[expr.zero-divisor] CALL @k: the divisor 0 of (8 // 0) is 0"),
    ("%y[0, 0; 8, 8]", "%y[0, (m % 0); 8, 8]", "[expr.zero-divisor] CALL @k: the divisor 0 of (m % 0) is 0"),
    # Generated C++ would overflow (undefined behaviour) computing these.
    ("%y[0, 0; 8, 8]", "%y[(9223372036854775807 * 2), 0; 8, 8]",
     "[expr.constant] CALL @k: (9223372036854775807 * 2) cannot be computed: integer overflow"),
    ("(n // 2)", "(n + (9223372036854775807 + 1))",
     "[expr.constant] tadd: (9223372036854775807 + 1) cannot be computed: integer overflow"),
])
def test_a_broken_rule_is_a_verify_error(old, new, message):
    assert old in PROGRAM
    with pytest.raises(pypto.VerifyError) as info:
        pypto.pto.compile(PROGRAM.replace(old, new))
    assert message in str(info.value)


def test_a_reduction_into_a_tile_too_small_for_its_result_is_refused():
    text = PROGRAM.replace("%r = alloc_tile : !pto.tile<8x1xf32>", "%r = alloc_tile : !pto.tile<4x1xf32>")
    text = text.replace("trowmax %t valid [8, 8] : !pto.tile<8x1xf32>", "trowmax %t valid [8, 8] : !pto.tile<4x1xf32>")
    text = text.replace("  %t = trowexpandsub %t, %r : !pto.tile<8x8xf32>\n", "")
    with pytest.raises(pypto.VerifyError, match=r"\[instr.shape\] trowmax: tile %r has 4 elements, reducing dim 1 "
                                                r"of tile %t gives 8"):
        pypto.pto.compile(text)
