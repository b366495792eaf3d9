"""Memory safety of compiled programs: every access of an InCore function stays inside the region
its CALL passed, every region and view inside its array, and symbolic arithmetic neither divides by
zero nor overflows. Reproducers that used to corrupt the heap, hang or kill the process run in a
child process, so a regression fails the test instead of ending the session."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import pypto
import pypto.pto as pto

# The builder demo module of docs/pto.md: y[8i:8i+8, :] = 2 * x[8i:8i+8, :] for i < n.
DEMO = """\
// PTO Module: demo
// Entry: @main

// Function Type: InCore
func @scale(%src: !pto.memref<gm,8x64,f32>, %dst: !pto.memref<gm,8x64,f32> out) {
  %t = alloc_tile : !pto.tile<8x64xf32>
  %u = alloc_tile : !pto.tile<8x64xf32>
  %t = tload %src[0, 0] valid [8, 64] : !pto.tile<8x64xf32>
  %u = tmuls %t, 2.0 : !pto.tile<8x64xf32>
  tstore %u, %dst[0, 0] valid [8, 64]
  return
}

// Function Type: Orchestration
func @main(%x: !pto.memref<gm,(x_d0)x(x_d1),f32>, %y: !pto.memref<gm,(y_d0)x(y_d1),f32>) {
  %n = alloc_scalar : i32
  %x_d0 = alloc_scalar : i64
  %x_d1 = alloc_scalar : i64
  %y_d0 = alloc_scalar : i64
  %y_d1 = alloc_scalar : i64
  FOR %i:idx, 0:idx, n:idx, 1:idx
    CALL @scale(%src -> %x[(i * 8), 0; 8, 64], %dst -> %y[(i * 8), 0; 8, 64])
  ENDFOR
  return
}
"""

# The same kernel with the row offset of its accesses passed by the CALL as a scalar `k`:
# the bound is checked once per task, in the orchestration.
SCALAR_OFFSET = """\
// Function Type: InCore
func @shift(%src: !pto.memref<gm,8x64,f32>, %dst: !pto.memref<gm,8x64,f32> out, %k: index) {
  %t = alloc_tile : !pto.tile<4x64xf32>
  %t = tload %src[k, 0] valid [4, 64] : !pto.tile<4x64xf32>
  tstore %t, %dst[k, 0] valid [4, 64]
  return
}

// Function Type: Orchestration
func @main(%x: !pto.memref<gm,8x64,f32>, %y: !pto.memref<gm,8x64,f32>) {
  %k = alloc_scalar : i64
  CALL @shift(%src -> %x[0, 0; 8, 64], %dst -> %y[0, 0; 8, 64], %k -> k)
  return
}
"""

# An access under an IF inside the InCore function: checked by the kernel where it runs.
GUARDED = SCALAR_OFFSET.replace(
    "  %t = tload %src[k, 0] valid [4, 64] : !pto.tile<4x64xf32>\n  tstore %t, %dst[k, 0] valid [4, 64]\n",
    "  IF (k != 3)\n    %t = tload %src[k, 0] valid [4, 64] : !pto.tile<4x64xf32>\n"
    "    tstore %t, %dst[k, 0] valid [4, 64]\n  ENDIF\n")


def _demo_arrays():
    return np.arange(64 * 64, dtype=np.float32).reshape(64, 64), np.zeros((64, 64), np.float32)


def _child(code: str, timeout: float = 240) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh Python; a crash shows as a negative return code, a hang as a timeout."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout)


def test_the_demo_module_runs():
    x, y = _demo_arrays()
    pto.compile(DEMO)(x, y, 8)
    np.testing.assert_array_equal(y, 2 * x)


@pytest.mark.parametrize("old, new, offending", [
    ("%dst[0, 0]", "%dst[-8, 0]", r"tstore %u -> %dst: dim 0 of the access is \[-8, 0\)"),
    ("%dst[0, 0]", "%dst[8, 0]", r"tstore %u -> %dst: dim 0 of the access is \[8, 16\)"),
    ("%src[0, 0]", "%src[8, 0]", r"tload %t <- %src: dim 0 of the access is \[8, 16\)"),
    ("%src[0, 0]", "%src[-100000000, 0]", r"tload %t <- %src: dim 0 of the access is \[-100000000, "),
    ("%src[0, 0]", "%src[0, 4294967296]", r"tload %t <- %src: dim 1 of the access is \[4294967296, "),
    ("%dst[0, 0]", "%dst[2147483647, 0]", r"tstore %u -> %dst: dim 0 of the access is \[2147483647, "),
])
def test_a_static_access_outside_its_region_is_a_compile_error(old, new, offending):
    # Each of these used to corrupt the heap, hang, crash or read past x (run in a child process).
    text = DEMO.replace(old, new)
    r = _child(f"""
        import numpy as np, pypto.pto as pto
        try:
            pto.compile({text!r})
        except ValueError as e:
            print("ERROR", e)
    """)
    assert r.returncode == 0, r.stderr
    assert "ERROR CALL @scale argument" in r.stdout
    import re
    assert re.search(offending, r.stdout), r.stdout
    assert "outside the region's extent" in r.stdout


def test_an_offset_near_2_to_63_is_an_overflow_error_not_a_wrap():
    with pytest.raises(ValueError, match="integer overflow in a symbolic expression"):
        pto.compile(DEMO.replace("%src[0, 0]", "%src[9223372036854775807, 0]"))


def test_a_loop_bound_past_the_region_is_a_compile_error():
    @pypto.frontend.jit
    def sm(x: pypto.Tensor((64, 256), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(32, 32)
        return pypto.softmax(x, -1)

    text = pypto.compile(sm, np.zeros((64, 256), np.float32)).pto()
    assert "0:idx, 8:idx, 1:idx" in text
    with pytest.raises(ValueError, match=r"CALL @\w+ argument %x -> %x: tload %\w+ <- %x: dim 1 of the access is "
                                         r"\[0, 1856\), outside the region's extent 256"):
        pto.compile(text.replace("0:idx, 8:idx, 1:idx", "0:idx, 58:idx, 1:idx", 1))


@pytest.mark.parametrize("k, ok", [(0, True), (4, True), (5, False), (-1, False)])
def test_a_scalar_offset_is_checked_once_per_task(k, ok):
    prog = pto.compile(SCALAR_OFFSET)
    x = np.arange(8 * 64, dtype=np.float32).reshape(8, 64)
    y = np.zeros_like(x)
    if ok:
        prog(x, y, k)
        np.testing.assert_array_equal(y[k:k + 4], x[k:k + 4])
        assert not y[:k].any() and not y[k + 4:].any()
    else:
        with pytest.raises(ValueError, match=r"CALL @shift argument %src -> %x: tload %t <- %src: dim 0 of the "
                                             rf"access is \[{k}, {k + 4}\), outside the region's extent 8"):
            prog(x, y, k)
        assert not y.any()
    assert "check_bound" in prog.source()


@pytest.mark.parametrize("k, ok", [(2, True), (3, True), (6, False)])
def test_an_access_under_an_if_is_checked_where_it_runs(k, ok):
    prog = pto.compile(GUARDED)
    assert "pto::check_access" in prog.source()
    x = np.arange(8 * 64, dtype=np.float32).reshape(8, 64)
    y = np.zeros_like(x)
    if ok:
        prog(x, y, k)
        expect = np.zeros_like(x)
        if k != 3:
            expect[k:k + 4] = x[k:k + 4]
        np.testing.assert_array_equal(y, expect)
    else:
        with pytest.raises(ValueError, match=r"@shift: tload %t <- %src: dim 0 of the access is \[6, 10\), outside "
                                             r"the region's extent 8"):
            prog(x, y, k)
    prog(x, y, 0)  # the runtime is usable after the failure


def _transpose_text():
    @pypto.frontend.jit
    def tr(x: pypto.Tensor((64, 48), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(16, 16)
        return pypto.add(pypto.transpose(x, 0, 1), 1.0)

    return pypto.compile(tr, np.zeros((64, 48), np.float32)).pto()


# A view starting past the end of its base holds nothing (as the tail block of a view with a valid
# shape may): the accesses through it are refused. One starting before its base is wrong itself.
EMPTY_VIEW = r"CALL @add_1 argument %v1 -> %v1: tload %t0 <- %v1: dim 0 of the access is \[0, 16\), outside the " \
             r"region's extent 0"


@pytest.mark.parametrize("offset, message", [
    ("[64, 0]", EMPTY_VIEW),
    ("[1000000, 0]", EMPTY_VIEW),
    ("[0, 2147483648]", EMPTY_VIEW),
    ("[-1000000, 0]", r"view %v1 of %x: the view starts at -1000000 in dim 0 of its base, outside its extent 64"),
    ("[0, -1]", r"view %v1 of %x: the view starts at -1 in dim 1 of its base, outside its extent 48"),
])
def test_a_view_outside_its_base_is_an_error(offset, message):
    text = _transpose_text()
    assert "view %x[0, 0]" in text
    mutated = text.replace("view %x[0, 0]", f"view %x{offset}")
    r = _child(f"""
        import numpy as np, pypto.pto as pto
        prog = pto.compile({mutated!r})
        x, out = np.ones((64, 48), np.float32), np.zeros((48, 64), np.float32)
        try:
            prog(x, out)
        except ValueError as e:
            print("ERROR", e)
    """)
    assert r.returncode == 0, r.stderr
    import re
    assert re.search(message, r.stdout), r.stdout


def test_a_view_whose_steps_walk_past_its_base_is_cut_and_its_accesses_refused():
    text = _transpose_text().replace("steps [1, 1]", "steps [1, 2]")
    prog = pto.compile(text)
    with pytest.raises(ValueError, match=r"outside the region's extent"):
        prog(np.ones((64, 48), np.float32), np.zeros((48, 64), np.float32))


def test_a_view_reaching_past_its_base_in_a_tail_block_is_still_right():
    # The dynamic softmax of examples/02_intermediate: its last block's view reaches past x, and only
    # the valid rows are touched.
    N, BLOCK = 96, 16

    @pypto.frontend.jit
    def rows(x: pypto.Tensor([pypto.DYNAMIC, N], pypto.DT_FP32), out: pypto.Tensor([pypto.DYNAMIC, N], pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(BLOCK, 32)
        n = x.shape[0]
        for b in pypto.loop(0, pypto.ceildiv(n, BLOCK), 1, idx_name="blk"):
            valid = (n - b * BLOCK).min(BLOCK)
            xb = pypto.view(x, [BLOCK, N], [b * BLOCK, 0], valid_shape=[valid, N])
            pypto.assemble(pypto.softmax(xb, -1), [b * BLOCK, 0], out)

    for n in (5, 37):
        x = np.random.default_rng(n).standard_normal((n, N)).astype(np.float32)
        out = np.zeros_like(x)
        rows(x, out)
        e = np.exp(x - x.max(-1, keepdims=True))
        np.testing.assert_allclose(out, e / e.sum(-1, keepdims=True), atol=1e-6)
        # The same through its .pto text.
        prog = pto.compile(pypto.compile(rows, x, out).pto())
        out2 = np.zeros_like(x)
        prog(x, out2)
        np.testing.assert_array_equal(out2, out)


def test_a_symbolic_divisor_that_is_zero_is_an_error_naming_it():
    # Used to kill the process with SIGFPE.
    r = _child("""
        import numpy as np, pypto

        @pypto.frontend.jit
        def f(x: pypto.Tensor([pypto.DYNAMIC, 16], pypto.DT_FP32), out: pypto.Tensor([pypto.DYNAMIC, 16], pypto.DT_FP32)):
            pypto.set_vec_tile_shapes(8, 16)
            n = x.shape[0]
            for b in pypto.loop(0, 8 // (n - 5), 1, idx_name="b"):
                pypto.assemble(pypto.add(pypto.view(x, [1, 16], [b, 0]), 1.0), [b, 0], out)

        x = np.ones((13, 16), np.float32); out = np.zeros_like(x)
        f(x, out)
        print("ROWS", int(out.sum() / 32))
        x = np.ones((5, 16), np.float32); out = np.zeros_like(x)
        try:
            f(x, out)
        except ValueError as e:
            print("ERROR", e)
    """)
    assert r.returncode == 0, r.stderr
    assert "ROWS 1" in r.stdout
    assert "ERROR 'f': the divisor (x_0 - 5) of (8 // (x_0 - 5)) is 0" in r.stdout


def test_a_loop_step_that_is_not_positive_is_an_error_not_a_hang():
    text = SCALAR_OFFSET.replace(
        "  CALL @shift(%src -> %x[0, 0; 8, 64], %dst -> %y[0, 0; 8, 64], %k -> k)\n",
        "  FOR %i:idx, 0:idx, 2:idx, k:idx\n    CALL @shift(%src -> %x[0, 0; 8, 64], %dst -> %y[0, 0; 8, 64], "
        "%k -> i)\n  ENDFOR\n")
    prog = pto.compile(text)
    x, y = np.ones((8, 64), np.float32), np.zeros((8, 64), np.float32)
    prog(x, y, 1)
    assert y[:5].all() and not y[5:].any()
    with pytest.raises(ValueError, match=r"FOR %i: the step k is not positive"):
        prog(x, y, 0)


@pytest.mark.parametrize("step", ["9223372036854775807", "k"])
def test_a_loop_step_near_2_to_63_ends_the_loop_instead_of_overflowing(step):
    # In the kernel (constant or scalar step) and in the orchestration: `i += step` used to wrap
    # past 2^63 (a hang, or accesses at negative offsets).
    kernel = SCALAR_OFFSET.replace(
        "  %t = tload %src[k, 0] valid [4, 64] : !pto.tile<4x64xf32>\n  tstore %t, %dst[k, 0] valid [4, 64]\n",
        f"  FOR %j:idx, 0:idx, 4:idx, {step}:idx\n    %t = tload %src[j, 0] valid [4, 64] : !pto.tile<4x64xf32>\n"
        "    tstore %t, %dst[j, 0] valid [4, 64]\n  ENDFOR\n")
    orchestration = SCALAR_OFFSET.replace(
        "  CALL @shift(%src -> %x[0, 0; 8, 64], %dst -> %y[0, 0; 8, 64], %k -> k)\n",
        f"  FOR %i:idx, 1:idx, 9223372036854775807:idx, {step}:idx\n    CALL @shift(%src -> %x[0, 0; 8, 64], "
        "%dst -> %y[0, 0; 8, 64], %k -> i)\n  ENDFOR\n")
    for text, rows in ((kernel, slice(0, 4)), (orchestration, slice(1, 5))):
        r = _child(f"""
            import numpy as np, pypto.pto as pto
            x = np.arange(8 * 64, dtype=np.float32).reshape(8, 64)
            y = np.zeros((8, 64), np.float32)
            pto.compile({text!r})(x, y, 9223372036854775807)
            expect = np.zeros_like(y)
            expect[{rows.start}:{rows.stop}] = x[{rows.start}:{rows.stop}]
            np.testing.assert_array_equal(y, expect)
            print("ok")
        """, timeout=120)
        assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-2000:]


def test_instructions_written_without_valid_extents_move_whole_tiles():
    # The seed's forms have no `valid`: the kernels used to read a zero-length array of extents.
    text = """\
// Function Type: InCore
func @rowmax(%input: !pto.memref<gm,8x8xf32>, %output: !pto.memref<gm,8x1xf32> out) {
  %x = tload %input[0, 0] : (!pto.memref) -> !pto.tile<8x8xf32>
  %result = trowmax %x : !pto.tile<8x8xf32> -> !pto.tile<8x1xf32>
  tstore %result, %output[0, 0]
  return
}

// Function Type: Orchestration
func @main(%input: !pto.memref<gm,16x8,f32>, %output: !pto.memref<gm,16x1,f32> out) {
  FOR %i:idx, 0:idx, 2:idx, 1:idx
    CALL @rowmax(%input -> %input[(i * 8), 0; 8, 8], %output -> %output[(i * 8), 0; 8, 1])
  ENDFOR
  return
}
"""
    prog = pto.compile(text)
    assert "valid[] = {8, 8};" in prog.source() and "valid[] = {};" not in prog.source()
    x = np.random.default_rng(0).standard_normal((16, 8)).astype(np.float32)
    out = np.zeros((16, 1), np.float32)
    prog(x, out)
    np.testing.assert_array_equal(out, x.max(1, keepdims=True))


def test_a_negative_valid_extent_moves_nothing():
    # A rank-1 tload with a negative valid extent used to zero-fill before its tile (SIGSEGV).
    text = DEMO.replace("%t = tload %src[0, 0] valid [8, 64]", "%t = tload %src[0, 0] valid [8, (64 - 2147483648)]")
    r = _child(f"""
        import numpy as np, pypto.pto as pto
        x = np.ones((64, 64), np.float32); y = np.full((64, 64), 5.0, np.float32)
        pto.compile({text!r})(x, y, 8)
        print("SUM", float(y.sum()))
    """)
    assert r.returncode == 0, r.stderr
    assert "SUM 0.0" in r.stdout  # every loaded row is all zeros, and 2 * 0 is stored


def test_a_call_passing_a_tensor_of_another_rank_is_a_verify_error():
    text = DEMO.replace("%x: !pto.memref<gm,(x_d0)x(x_d1),f32>", "%x: !pto.memref<gm,(x_d0),f32>").replace(
        "%x[(i * 8), 0; 8, 64]", "%x[(i * 8); 8]")
    with pytest.raises(pypto.VerifyError, match=r"CALL @scale: %x has rank 1, parameter %src rank 2"):
        pto.compile(text)


GATHER = """\
// Function Type: InCore
func @g(%src: !pto.memref<gm,8x4,f32>, %idx: !pto.memref<gm,4x4,i32>, %o: !pto.memref<gm,4x4,f32> out) {
  %i = alloc_tile : !pto.tile<4x4xi32>
  %t = alloc_tile : !pto.tile<4x4xf32>
  %i = tload %idx[0, 0] valid [4, 4] : !pto.tile<4x4xi32>
  %t = tgather %src[0, 0], %i axis=0 valid [4, 4] : !pto.tile<4x4xf32>
  tstore %t, %o[0, 0] valid [4, 4]
  return
}

// Function Type: Orchestration
func @main(%x: !pto.memref<gm,8x4,f32>, %ix: !pto.memref<gm,4x4,i32>, %y: !pto.memref<gm,4x4,f32> out) {
  CALL @g(%src -> %x, %idx -> %ix, %o -> %y)
  return
}
"""

SCATTER = GATHER.replace("%o: !pto.memref<gm,4x4,f32> out", "%o: !pto.memref<gm,8x4,f32> out").replace(
    "  %t = tgather %src[0, 0], %i axis=0 valid [4, 4] : !pto.tile<4x4xf32>\n"
    "  tstore %t, %o[0, 0] valid [4, 4]\n",
    "  %t = tload %src[0, 0] valid [4, 4] : !pto.tile<4x4xf32>\n"
    "  tscatter %t, %o[0, 0], %i axis=0 valid [4, 4]\n").replace(
    "%y: !pto.memref<gm,4x4,f32> out", "%y: !pto.memref<gm,8x4,f32> out")


@pytest.mark.parametrize("bad", [8, -1, 2**31 - 1])
def test_a_gather_or_scatter_index_outside_its_axis_is_an_error_naming_it(bad):
    # It used to end the task with a bare "kernel returned status 2". Still a TaskError (a
    # RuntimeError, as torch.gather's), now naming the function, the instruction and the index.
    x = np.arange(32, dtype=np.float32).reshape(8, 4)
    ix = np.array([[0, 1, 2, 3], [7, 6, 5, 4], [1, 3, 5, 7], [2, 4, 6, 0]], np.int32)
    gather, scatter = pto.compile(GATHER), pto.compile(SCATTER)
    y = np.zeros((4, 4), np.float32)
    gather(x, ix, y)
    np.testing.assert_array_equal(y, np.take_along_axis(x, ix, 0))
    s = np.zeros((8, 4), np.float32)
    scatter(x, ix, s)
    expect = np.zeros_like(s)
    np.put_along_axis(expect, ix, x[:4], 0)
    np.testing.assert_array_equal(s, expect)
    ix[2, 1] = bad
    with pytest.raises(pypto.TaskError, match=rf"'main': @g: tgather %t <- %src: index {bad} on axis 0 is outside \[0, 8\)"):
        gather(x, ix, y)
    with pytest.raises(pypto.TaskError, match=rf"'main': @g: tscatter %t -> %o: index {bad} on axis 0 is outside \[0, 8\)"):
        scatter(x, ix, s)
