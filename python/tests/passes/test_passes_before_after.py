"""Each pass on a small program: the IR after it (compiled.dump("passes"))
against the structure it must have, compared with the IR before it."""

import re

import pytest
import torch

import pypto

F = torch.nn.functional


def _softmax(x: pypto.Tensor((64, 128), pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(32, 32)
    return pypto.softmax(x, -1)


def _parse(text):
    """{pass: {"state", "ir", "notes"}} from compiled.dump("passes")."""
    out, name = {}, None
    for line in text.splitlines():
        m = re.match(r"-- pass (\w+) \(([\d.]+) ms, (\w+)", line)
        if m:
            name = m.group(1)
            out[name] = {"state": m.group(3), "ir": [], "notes": []}
        elif name and line.startswith("   note: "):
            out[name]["notes"].append(line[len("   note: "):])
        elif name:
            out[name]["ir"].append(line)
    return {k: {"state": v["state"], "ir": "\n".join(v["ir"]), "notes": v["notes"]} for k, v in out.items()}


def _passes(fn, *args, **opts):
    return _parse(pypto.compile(pypto.jit(fn, pass_options=opts or None), *args).dump("passes"))


@pytest.fixture(scope="module")
def softmax_passes():
    return _passes(_softmax, torch.randn(64, 128))


def test_every_registered_pass_reports_in_order(softmax_passes):
    assert list(softmax_passes) == list(pypto._C.pass_names())


def test_expand_tiles_gives_one_nest_per_op_with_tails_and_accumulators(softmax_passes):
    ir = softmax_passes["expand_tiles"]["ir"]
    assert ir.startswith("tile_graph @_softmax")
    assert [n for n in re.findall(r"nest @(\w+):", ir)] == ["amax_0", "sub_1", "exp_2", "sum_3", "div_4"]
    assert "tfill -inf" in ir and "tfill 0" in ir          # accumulators before the reduced loops
    assert ir.count(" parallel dim=0 tile=32") == 5        # every op walks the 2 row blocks in parallel


def test_fuse_blocks_groups_the_chain_over_the_row_grid(softmax_passes):
    ir = softmax_passes["fuse_blocks"]["ir"]
    assert ir.count("incore func @") == 1
    assert "fused=[amax_0, sub_1, exp_2, sum_3, div_4]" in ir
    assert re.search(r"launch @\w+ over \[%g0 < 2 \(dim 0, tile 32\)\]", ir)


def test_fuse_loops_merges_sub_exp_sum(softmax_passes):
    before = softmax_passes["fuse_blocks"]["ir"]
    after = softmax_passes["fuse_loops"]["ir"]
    assert softmax_passes["fuse_loops"]["state"] == "changed"
    assert before.count("FOR %") == 5 and after.count("FOR %") == 3


def test_forward_tiles_keeps_one_local(softmax_passes):
    before = softmax_passes["fuse_loops"]["ir"]
    after = softmax_passes["forward_tiles"]["ir"]
    assert before.count("alloc_local") > after.count("alloc_local") == 1


def test_rematerialize_is_unchanged_within_budget_and_acts_over_it(softmax_passes):
    assert softmax_passes["rematerialize"]["state"] == "unchanged"
    tight = _passes(_softmax, torch.randn(64, 128), sram_budget_kb=16)
    assert tight["rematerialize"]["state"] == "changed"
    assert "alloc_local" not in tight["rematerialize"]["ir"]


def test_plan_buffers_sets_bytes_below_the_sum_of_buffers(softmax_passes):
    ir = softmax_passes["plan_buffers"]["ir"]
    planned = int(re.search(r"buffer_bytes=(\d+)", ir).group(1))
    before = int(re.search(r"buffer_bytes=(\d+)", softmax_passes["rematerialize"]["ir"] or
                           softmax_passes["forward_tiles"]["ir"]).group(1))
    assert before == 0 < planned  # bytes are only known after planning


def test_build_orchestration_wraps_the_call_in_the_grid_loop(softmax_passes):
    ir = softmax_passes["build_orchestration"]["ir"]
    assert ir.startswith("execution_graph @_softmax")
    assert re.search(r"FOR %g0:idx, 0:idx, 2:idx, 1:idx parallel dim=0 tile=32\n\s+CALL @", ir)


def test_disabled_pass_is_marked_skipped():
    p = _passes(_softmax, torch.randn(64, 128), disable_passes=["fuse_loops"])
    assert p["fuse_loops"]["state"] == "skipped"


# ---------------------------------------------------------------------------
# More programs: layer norm, matmul + bias + GELU and an elementwise chain.
# Each test compares the IR after one pass with the IR the pass received.

class _Program:
    """One compiled program, its per-pass IR and its torch reference."""

    def __init__(self, fn, args, ref, **opts):
        self.compiled = pypto.compile(pypto.jit(fn, pass_options=opts or None), *args)
        self.passes = _parse(self.compiled.dump("passes"))
        self.args, self.ref = args, ref

    def before(self, name):
        """The IR `name` received: the last IR printed by an earlier pass (the Tensor Graph for the first)."""
        ir = self.compiled.dump("tensor")
        for p, rec in self.passes.items():
            if p == name:
                return ir
            ir = rec["ir"] or ir
        raise KeyError(name)

    def after(self, name):
        """The IR after `name` (the same as before it when the pass changed nothing)."""
        return self.passes[name]["ir"] or self.before(name)


def _ops(text):
    """Instruction opcodes in program order (loops flattened), from IR text or a function's body lines."""
    if isinstance(text, list):
        text = "\n".join(text)
    return [m.group(1) for m in re.finditer(r"^\s*(?:%\w+ = )?(t[a-z_]+) [^@]", text, re.M)]


def _nests(tile_ir):
    """{nest name: its text} of a Tile Graph, in order."""
    parts = re.split(r"^  nest @(\w+):.*$", tile_ir, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def _functions(block_ir):
    """The InCore functions of a Block Graph: name, fused nests, buffer bytes and body lines."""
    funcs, cur = [], None
    for line in block_ir.splitlines():
        m = re.match(r"incore func @(\w+)\(.*\) buffer_bytes=(\d+)(?: fused=\[(.*)\])? \{$", line)
        if m:
            cur = {"name": m.group(1), "fused": m.group(3).split(", ") if m.group(3) else None,
                   "bytes": int(m.group(2)), "body": []}
            funcs.append(cur)
        elif cur is not None and line == "}":
            cur = None
        elif cur is not None:
            cur["body"].append(line)
    return funcs


def _top_level(body):
    """Top-level statements of a function body: opcodes, and FOR for a loop."""
    out = []
    for line in body:
        if re.match(r"^  FOR ", line):
            out.append("FOR")
        elif re.match(r"^  \S", line):
            out += _ops(line)
    return " ".join(out)


def _loops(body):
    """Opcodes of each top-level loop of a function body, in order."""
    loops, cur = [], None
    for line in body:
        if re.match(r"^  FOR ", line):
            cur = []
        elif re.match(r"^  ENDFOR", line):
            loops.append(" ".join(cur))
            cur = None
        elif cur is not None:
            cur += _ops(line)
    return loops


def _tile_operands(body, opcode):
    """(dst, [srcs]) of every `opcode` instruction in a function body."""
    out = []
    for line in body:
        m = re.match(rf"^\s*%(\w+) = {opcode} ([^:]*?)(?:\s+valid.*)?\s*:", line)
        if m:
            out.append((m.group(1), re.findall(r"%(\w+)", m.group(2))))
    return out


def _declared_bytes(body):
    """Bytes of every (f32) tile and local buffer a function declares, each rounded to 64."""
    total = 0
    for line in body:
        m = re.search(r"alloc_(?:tile : !pto\.tile<([\dx]+)xf32>|local : !pto\.memref<local,([\dx]+),f32>)", line)
        if m:
            n = 4
            for d in (m.group(1) or m.group(2)).split("x"):
                n *= int(d)
            total += -(-n // 64) * 64
    return total


def _without_bytes(ir):
    return re.sub(r"buffer_bytes=\d+", "buffer_bytes=-", ir)


def _calls(ir):
    return [l.strip() for l in ir.splitlines() if l.strip().startswith("CALL @")]


# -- layer norm ----------------------------------------------------------------

def _layer_norm(x: pypto.Tensor((64, 128), pypto.DT_FP32), w: pypto.Tensor((128,), pypto.DT_FP32),
                b: pypto.Tensor((128,), pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(32, 32)
    return pypto.layer_norm(x, w, b)


def _layer_norm_args():
    torch.manual_seed(0)
    x, w, b = torch.randn(64, 128), torch.randn(128), torch.randn(128)
    return (x, w, b), F.layer_norm(x, (128,), w, b)


LN_OPS = ["sum", "div", "sub", "mul", "sum", "div", "add", "rsqrt", "mul", "mul", "add"]
LN_NESTS = [f"{op}_{i}" for i, op in enumerate(LN_OPS)]


@pytest.fixture(scope="module")
def ln():
    return _Program(_layer_norm, *_layer_norm_args())


def test_layer_norm_expand_tiles_one_nest_per_op(ln):
    before, after = ln.before("expand_tiles"), ln.after("expand_tiles")
    assert re.findall(r"^  %\w+ = (\w+)\(", before, re.M) == LN_OPS
    nests = _nests(after)
    assert list(nests) == LN_NESTS
    assert after.count(" parallel dim=0 tile=32") == len(LN_OPS)  # every op walks the row blocks
    assert after.count("// workspace") == 10                      # every intermediate in global memory
    for red in ("sum_0", "sum_4"):                                # accumulated over the column tiles
        assert _ops(nests[red]) == ["tfill", "tload", "trowsum", "tadd", "tstore"]
    assert _ops(nests["sub_2"]) == ["tload", "tload", "trowexpandsub", "tstore"]       # x - mean[:, None]
    assert _ops(nests["mul_8"]) == ["tload", "tload", "trowexpandmul", "tstore"]       # * rstd[:, None]
    assert _ops(nests["mul_9"]) == ["tload", "tload", "treshape", "tcolexpandmul", "tstore"]  # * w[None, :]
    assert _ops(nests["add_10"]) == ["tload", "tload", "treshape", "tcolexpandadd", "tstore"]


def test_layer_norm_fuse_blocks_makes_one_function_with_local_buffers(ln):
    before, after = ln.before("fuse_blocks"), ln.after("fuse_blocks")
    funcs = _functions(after)
    assert len(funcs) == 1 and funcs[0]["fused"] == list(_nests(before)) == LN_NESTS
    assert re.findall(r"^launch @(\w+) over (.*):$", after, re.M) == [
        (funcs[0]["name"], "[%g0 < 2 (dim 0, tile 32)]")]
    # Each nest's row loop became the launch grid; the other loops run inside.
    assert before.count("FOR %") == 22 and after.count("FOR %") == 22 - len(LN_NESTS)
    # The ten intermediates are one row block each, kept in the function.
    assert before.count("// workspace") == 10 and after.count("// workspace") == 0
    assert after.count("alloc_local") == 10
    assert _ops(before) == _ops(after)  # same instructions, same order


def test_layer_norm_fuse_loops_merges_the_variance_and_the_epilogue(ln):
    assert ln.passes["fuse_loops"]["state"] == "changed"
    (fb,), (fa,) = _functions(ln.before("fuse_loops")), _functions(ln.after("fuse_loops"))
    assert _top_level(fb["body"]) == "tfill FOR tstore FOR FOR FOR tfill FOR tstore FOR FOR FOR FOR FOR FOR"
    assert _top_level(fa["body"]) == "tfill FOR tstore FOR tfill FOR tstore FOR FOR FOR FOR"
    loops = _loops(fa["body"])
    # sub, square and sum in one pass over the columns; likewise normalise, scale and shift.
    assert loops[2] == "tload tload trowexpandsub tstore tload tload tmul tstore tload trowsum tadd"
    assert loops[6] == ("tload tload trowexpandmul tstore tload tload treshape tcolexpandmul tstore "
                        "tload tload treshape tcolexpandadd tstore")
    assert sorted(_ops(fb["body"])) == sorted(_ops(fa["body"]))  # nothing added or dropped


def test_layer_norm_flatten_loops_makes_the_per_row_scalar_loops_straight_code(ln):
    # The mean, variance and rsqrt nests work on [32, 1] blocks: their column loops run once.
    assert ln.passes["flatten_loops"]["state"] == "changed"
    (fb,), (fa,) = _functions(ln.before("flatten_loops")), _functions(ln.after("flatten_loops"))
    assert _top_level(fb["body"]) == "tfill FOR tstore FOR tfill FOR tstore FOR FOR FOR FOR"
    assert _top_level(fa["body"]) == ("tfill FOR tstore tload tdivs tstore tfill FOR tstore tload tdivs tstore "
                                      "tload tadds tstore tload trsqrt tstore FOR")
    assert sorted(_ops(fb["body"])) == sorted(_ops(fa["body"]))  # nothing added or dropped


def test_layer_norm_forward_tiles_drops_the_row_blocks_read_in_the_same_loop(ln):
    before, after = ln.before("forward_tiles"), ln.after("forward_tiles")
    locals_before = set(re.findall(r"%(\w+) = alloc_local", before))
    locals_after = set(re.findall(r"%(\w+) = alloc_local", after))
    # square's and the two epilogue products' blocks go, and so do the per-row scalars (mean,
    # variance, rsqrt), now stored and loaded in straight code; x - mean stays for the
    # normalisation in a later loop.
    assert locals_before - locals_after == {"v3", "v4", "v6", "v7", "v8", "v9", "v10", "v11", "v12"}
    assert locals_after == {"v5"}
    (f,) = _functions(after)
    assert _top_level(f["body"]) == "tfill FOR tdivs tfill FOR tdivs tadds trsqrt FOR"
    loops = _loops(f["body"])
    assert loops[1] == "tload trowexpandsub tstore tmul trowsum tadd"
    assert loops[2] == "tload trowexpandmul tload treshape tcolexpandmul tload treshape tcolexpandadd tstore"
    ((sub_dst, _),) = _tile_operands(f["body"], "trowexpandsub")
    ((_, mul_srcs),) = _tile_operands(f["body"], "tmul")
    assert mul_srcs == [sub_dst, sub_dst]  # (x - mean)^2 straight from the subtraction's tile
    assert _ops(before).count("tload") - _ops(after).count("tload") == 11


def test_layer_norm_rematerialize_recomputes_x_minus_mean_under_a_tight_budget(ln):
    assert ln.passes["rematerialize"]["state"] == "unchanged"  # 28 KB fits 256 KB
    (f,) = _functions(ln.after("plan_buffers"))
    budget_kb = f["bytes"] // 1024 - 4
    args, ref = _layer_norm_args()
    tight = _Program(_layer_norm, args, ref, sram_budget_kb=budget_kb)
    # The mean reaches x - mean as a tile (forward_tiles), so the block of x - mean can be
    # recomputed from x where it is read again instead of kept: the function fits uncut.
    assert tight.passes["rematerialize"]["state"] == "changed"
    assert "alloc_local" not in tight.after("rematerialize")
    assert tight.passes["fuse_blocks"]["notes"] == []
    (g,) = _functions(tight.after("plan_buffers"))
    assert g["fused"] == LN_NESTS and g["bytes"] <= budget_kb * 1024
    assert len(_calls(tight.after("build_orchestration"))) == 1
    torch.testing.assert_close(tight.compiled(*args), ref, atol=1e-4, rtol=1e-4)


def test_layer_norm_plan_buffers_only_sets_the_bytes(ln):
    before, after = ln.before("plan_buffers"), ln.after("plan_buffers")
    (fb,), (fa,) = _functions(before), _functions(after)
    assert fb["bytes"] == 0
    # At least the 32x128 block of x - mean and a tile live beside it; less than every buffer apart.
    assert 32 * 128 * 4 + 32 * 32 * 4 <= fa["bytes"] < _declared_bytes(fa["body"])
    assert _without_bytes(after) == _without_bytes(before)
    # fuse_chains may give a tile bytes past the planned arena; the kernel's arena is the final count.
    (ff,) = _functions(ln.after("fuse_chains"))
    assert fa["bytes"] <= ff["bytes"] <= fa["bytes"] + 32 * 32 * 4
    assert ln.compiled.stats()["buffer_bytes"] == {ff["name"]: ff["bytes"]}


def test_layer_norm_build_orchestration_calls_once_per_row_block(ln):
    before, after = ln.before("build_orchestration"), ln.after("build_orchestration")
    assert after.startswith("execution_graph @_layer_norm") and "func @" not in after
    assert _calls(after) == _calls(before) and len(_calls(after)) == 1
    assert re.search(r"^  FOR %g0:idx, 0:idx, 2:idx, 1:idx parallel dim=0 tile=32\n    CALL @", after, re.M)
    assert ln.compiled.stats()["tasks"] == 2


def test_layer_norm_matches_torch(ln):
    torch.testing.assert_close(ln.compiled(*ln.args), ln.ref, atol=1e-4, rtol=1e-4)


# -- matmul + bias + GELU -----------------------------------------------------

def _mm_bias_gelu(x: pypto.Tensor((64, 128), pypto.DT_FP32), w: pypto.Tensor((128, 96), pypto.DT_FP32),
                  b: pypto.Tensor((96,), pypto.DT_FP32)):
    pypto.set_cube_tile_shapes([16, 32], [32, 64], [32, 32])
    pypto.set_vec_tile_shapes(16, 32)
    return pypto.gelu(x @ w + b)


@pytest.fixture(scope="module")
def mm():
    torch.manual_seed(1)
    x, w, b = torch.randn(64, 128), torch.randn(128, 96) / 8, torch.randn(96)
    return _Program(_mm_bias_gelu, (x, w, b), F.gelu(x @ w + b))


def test_mm_bias_gelu_expand_tiles_walks_k_and_retiles_the_epilogue(mm):
    after = mm.after("expand_tiles")
    nests = _nests(after)
    assert list(nests) == ["matmul_0", "add_1", "gelu_2"]
    # The first k tile starts the accumulator, the loop over the other one accumulates into it.
    assert _ops(nests["matmul_0"]) == ["tload", "tload", "tmatmul", "tload", "tload", "tmatmul_acc", "tstore"]
    assert "FOR %k0:idx, 1:idx, 2:idx, 1:idx" in nests["matmul_0"]
    assert re.search(r"%(\w+) = tmatmul_acc %\1, ", nests["matmul_0"])
    # bias and GELU take the matmul's 32x32 output tile instead of the vec tile [16, 32].
    for n in ("add_1", "gelu_2"):
        assert f"nest @{n}:  // retiled to [32, 32] (the output tile of @matmul_0) to fuse with it" in after
    assert after.count(" parallel dim=0 tile=32") == 3 and after.count(" parallel dim=1 tile=32") == 3
    assert _ops(nests["add_1"]) == ["tload", "tload", "treshape", "tcolexpandadd", "tstore"]
    assert _ops(nests["gelu_2"]) == ["tload", "tgelu", "tstore"]


def test_mm_bias_gelu_fuse_blocks_over_the_output_tile_grid(mm):
    before, after = mm.before("fuse_blocks"), mm.after("fuse_blocks")
    funcs = _functions(after)
    assert len(funcs) == 1 and funcs[0]["fused"] == ["matmul_0", "add_1", "gelu_2"]
    assert re.findall(r"^launch @\w+ over (.*):$", after, re.M) == [
        "[%g0 < 2 (dim 0, tile 32), %g1 < 3 (dim 1, tile 32)]"]
    # Both grid loops of every nest are the launch grid; only the k loop is left.
    assert before.count("FOR %") == 7 and after.count("FOR %") == 1
    assert after.count("alloc_local") == 2
    (call,) = _calls(after)
    assert "%x -> %x[(g0 * 32), 0; 32, 128]" in call and "%w -> %w[0, (g1 * 32); 128, 32]" in call
    assert _ops(before) == _ops(after)


def test_mm_bias_gelu_fuse_loops_has_nothing_to_merge(mm):
    assert mm.passes["fuse_loops"]["state"] == "unchanged"
    assert mm.after("fuse_loops") == mm.before("fuse_loops")


def test_mm_bias_gelu_forward_tiles_feeds_the_accumulator_to_the_epilogue(mm):
    before, after = mm.before("forward_tiles"), mm.after("forward_tiles")
    assert before.count("alloc_local") == 2 and after.count("alloc_local") == 0
    (f,) = _functions(after)
    assert " ".join(_ops(f["body"])) == (
        "tload tload tmatmul tload tload tmatmul_acc tload treshape tcolexpandadd tgelu tstore")
    ((acc, _),) = _tile_operands(f["body"], "tmatmul")
    ((add, add_srcs),) = _tile_operands(f["body"], "tcolexpandadd")
    ((_, gelu_srcs),) = _tile_operands(f["body"], "tgelu")
    assert add_srcs[0] == acc and gelu_srcs == [add]
    assert re.findall(r"tstore %\w+, %(\w+)\[", after) == ["out"]


def test_mm_bias_gelu_rematerialize_and_plan_buffers(mm):
    assert mm.passes["rematerialize"]["state"] == "unchanged"  # no local buffer left
    before, after = mm.before("plan_buffers"), mm.after("plan_buffers")
    (f,) = _functions(after)
    # Operand tiles are dead once the product is done: the epilogue reuses their bytes.
    assert _functions(before)[0]["bytes"] == 0 < f["bytes"] < _declared_bytes(f["body"])
    assert _without_bytes(after) == _without_bytes(before)


def test_mm_bias_gelu_build_orchestration_nests_both_grid_dims(mm):
    before, after = mm.before("build_orchestration"), mm.after("build_orchestration")
    assert re.search(r"^  FOR %g0:idx, 0:idx, 2:idx, 1:idx parallel dim=0 tile=32\n"
                     r"    FOR %g1:idx, 0:idx, 3:idx, 1:idx parallel dim=1 tile=32\n"
                     r"      CALL @", after, re.M)
    assert _calls(after) == _calls(before) and len(_calls(after)) == 1
    assert mm.compiled.stats()["tasks"] == 6


def test_mm_bias_gelu_matches_torch(mm):
    torch.testing.assert_close(mm.compiled(*mm.args), mm.ref, atol=1e-4, rtol=1e-4)


# -- elementwise chain: exp, mul, add ------------------------------------------

def _chain(a: pypto.Tensor((64, 128), pypto.DT_FP32), b: pypto.Tensor((64, 128), pypto.DT_FP32),
           c: pypto.Tensor((64, 128), pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(32, 64)
    return pypto.exp(a) * b + c


def _chain_args():
    torch.manual_seed(2)
    a, b, c = torch.randn(64, 128), torch.randn(64, 128), torch.randn(64, 128)
    return (a, b, c), torch.exp(a) * b + c


@pytest.fixture(scope="module")
def chain():
    return _Program(_chain, *_chain_args())


@pytest.fixture(scope="module")
def chain_unfused():
    return _Program(_chain, *_chain_args(), fusion=False)


def test_chain_expand_tiles(chain):
    assert re.findall(r"^  %\w+ = (\w+)\(", chain.before("expand_tiles"), re.M) == ["exp", "mul", "add"]
    after = chain.after("expand_tiles")
    nests = _nests(after)
    assert list(nests) == ["exp_0", "mul_1", "add_2"]
    assert [_ops(t) for t in nests.values()] == [
        ["tload", "texp", "tstore"], ["tload", "tload", "tmul", "tstore"], ["tload", "tload", "tadd", "tstore"]]
    assert after.count(" parallel dim=0 tile=32") == 3 and after.count(" parallel dim=1 tile=64") == 3


def test_chain_fuse_blocks_puts_every_loop_in_the_grid(chain, chain_unfused):
    before, after = chain.before("fuse_blocks"), chain.after("fuse_blocks")
    (f,) = _functions(after)
    assert f["fused"] == ["exp_0", "mul_1", "add_2"]
    assert re.findall(r"^launch @\w+ over (.*):$", after, re.M) == [
        "[%g0 < 2 (dim 0, tile 32), %g1 < 2 (dim 1, tile 64)]"]
    assert before.count("FOR %") == 6 and after.count("FOR %") == 0
    assert after.count("alloc_local") == 2 and _ops(before) == _ops(after)
    # Without fusion every nest is a function of its own and the intermediates stay in global memory.
    un = chain_unfused.after("fuse_blocks")
    assert [g["fused"] for g in _functions(un)] == [["exp_0"], ["mul_1"], ["add_2"]]
    assert re.findall(r"^launch @(\w+)", un, re.M) == ["exp_0", "mul_1", "add_2"]
    assert un.count("alloc_local") == 0 and un.count("// workspace") == 2


def test_chain_fuse_loops_is_unchanged(chain):
    assert chain.passes["fuse_loops"]["state"] == "unchanged"


def test_chain_forward_tiles_keeps_values_in_tiles(chain, chain_unfused):
    before, after = chain.before("forward_tiles"), chain.after("forward_tiles")
    assert " ".join(_ops(before)) == "tload texp tstore tload tload tmul tstore tload tload tadd tstore"
    assert " ".join(_ops(after)) == "tload texp tload tmul tload tadd tstore"
    assert after.count("alloc_local") == 0
    (f,) = _functions(after)
    ((e, _),) = _tile_operands(f["body"], "texp")
    ((m, m_srcs),) = _tile_operands(f["body"], "tmul")
    ((_, a_srcs),) = _tile_operands(f["body"], "tadd")
    assert m_srcs[0] == e and a_srcs[0] == m
    # Workspaces are read by other tasks: nothing to forward without fusion.
    assert chain_unfused.passes["forward_tiles"]["state"] == "unchanged"


def test_chain_rematerialize_and_plan_buffers(chain):
    assert chain.passes["rematerialize"]["state"] == "unchanged"
    before, after = chain.before("plan_buffers"), chain.after("plan_buffers")
    (f,) = _functions(after)
    tile = 32 * 64 * 4
    # Six tiles declared; at most three are live at once (a product, an operand, the result).
    assert _declared_bytes(f["body"]) == 6 * tile
    assert 2 * tile <= f["bytes"] <= 3 * tile
    assert _without_bytes(after) == _without_bytes(before)


def test_chain_build_orchestration(chain, chain_unfused):
    after = chain.after("build_orchestration")
    assert len(_calls(after)) == 1 and after.count("FOR %") == 2
    assert chain.compiled.stats()["tasks"] == 4
    un = chain_unfused.after("build_orchestration")
    # One grid nest per launch, in program order.
    assert [c.split("(")[0] for c in _calls(un)] == ["CALL @exp_0", "CALL @mul_1", "CALL @add_2"]
    assert un.count("FOR %g0") == 3 and un.count("FOR %g1") == 3
    assert _calls(un) == _calls(chain_unfused.before("build_orchestration"))
    assert chain_unfused.compiled.stats()["tasks"] == 12


def test_chain_matches_torch(chain, chain_unfused):
    torch.testing.assert_close(chain.compiled(*chain.args), chain.ref, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(chain_unfused.compiled(*chain.args), chain.ref, atol=1e-5, rtol=1e-5)


def _colsum(x: pypto.Tensor((96, 64), pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(32, 32)
    return pypto.sum(pypto.exp(x), 0, True)


def test_reorder_loops_interchanges_the_producer_for_a_column_reduction():
    p = _passes(_colsum, torch.randn(96, 64))
    before, after = p["expand_tiles"]["ir"], p["reorder_loops"]["ir"]
    assert p["reorder_loops"]["state"] == "changed"
    grid = lambda ir, nest: re.findall(r"parallel dim=(\d) tile=(\d+)", ir.split(f"nest @{nest}:")[1].split("nest @")[0])
    assert grid(before, "exp_0") == [("0", "32"), ("1", "32")]
    assert grid(after, "exp_0") == [("1", "32"), ("0", "32")]
    assert grid(after, "sum_1") == grid(before, "sum_1") == [("1", "32")]
    assert _ops(before) == _ops(after)  # the same instructions, only the loops move
    assert "fused=[exp_0, sum_1]" in p["fuse_blocks"]["ir"]


def test_reorder_loops_is_unchanged_on_an_aligned_chain(softmax_passes):
    assert softmax_passes["reorder_loops"]["state"] == "unchanged"


def test_binary_expand_is_unchanged_without_ranged_loops(softmax_passes):
    assert softmax_passes["binary_expand"]["state"] == "unchanged"


def test_binary_expand_turns_a_ranged_loop_into_blocks_and_a_residual():
    from pypto.pto import ElementType, MemorySpace, PTOFunctionBuilder, PTOModule

    m = PTOModule("be")
    (PTOFunctionBuilder("neg", module=m).in_core().memref("a", MemorySpace.GLOBAL, ElementType.F32)
        .memref("b", MemorySpace.GLOBAL, ElementType.F32).tile("t", 4, 8).tile("u", 4, 8)
        .load("t", "a").neg("u", "t").store("u", "b").build())
    (PTOFunctionBuilder("main", module=m).not_in_core().memref("x", MemorySpace.GLOBAL, ElementType.F32)
        .memref("y", MemorySpace.GLOBAL, ElementType.F32).scalar("n")
        .for_loop("i", 0, "n", 1, max_range=64, min_range=16)
        .call("neg", {"a": ("x", "i", 0), "b": ("y", "i", 0)}).end_for().build())
    prog = pypto.pto.compile(m)
    before = prog.pto()
    passes = _parse(prog.dump("passes"))
    after = passes["binary_expand"]["ir"]
    assert passes["binary_expand"]["state"] == "changed"
    assert "max_range=64 min_range=16" in before and "max_range" not in after
    # 64-blocks repeated n // 64 times, IFs for the 32 and 16 bits, a residual loop.
    loops = re.findall(r"FOR %(\w+):idx, 0:idx, ", after)
    assert loops == ["i_blk", "i_64", "i_32", "i_16", "i_r"]
    assert after.count("IF ") == 3 and after.count("CALL @neg") == 4
    x, y = torch.randn(100 * 4, 8), torch.zeros(100 * 4, 8)
    prog(x, y, 100)
    torch.testing.assert_close(y, -x)
    assert prog.count_tasks(x, y, 100) == 100


# -- two products of one operand ------------------------------------------------

N_TOK = pypto.frontend.dynamic("N_TOK")


def _gate_up(wg: pypto.Tensor((128, 256), pypto.DT_FP32), wu: pypto.Tensor((128, 256), pypto.DT_FP32),
             x: pypto.Tensor((N_TOK, 256), pypto.DT_FP32)):
    # The gate and up projections of a block of tokens, transposed (W @ x^T): both products read
    # the same tile of x^T, a transposing copy.
    pypto.set_cube_tile_shapes([64, 64], [256, 256], [32, 32])
    xt = pypto.transpose(x, 0, 1)
    g, u = pypto.matmul(wg, xt), pypto.matmul(wu, xt)
    pypto.set_vec_tile_shapes(64, 32)
    return pypto.silu(g) * u


@pytest.fixture(scope="module")
def gate_up():
    torch.manual_seed(2)
    wg, wu, x = torch.randn(128, 256) / 16, torch.randn(128, 256) / 16, torch.randn(45, 256)
    return _Program(_gate_up, (wg, wu, x), F.silu(wg @ x.T) * (wu @ x.T))


def test_gate_up_forward_tiles_loads_the_shared_operand_once(gate_up):
    before, after = gate_up.before("forward_tiles"), gate_up.after("forward_tiles")
    (fb,), (fa,) = _functions(before), _functions(after)
    x_loads = lambda f: [ln for ln in f["body"] if re.search(r"= tload .*: !pto.tile<256x32xf32>", ln)]
    assert len(x_loads(fb)) == 2 and len(x_loads(fa)) == 1
    # Both products read the one tile of x^T.
    prods = _tile_operands(fa["body"], "tmatmul")
    assert len(prods) == 2 and prods[0][1][1] == prods[1][1][1]
    assert " ".join(_ops(fa["body"])) == "tload tload tmatmul tload tmatmul tsilu tmul tstore"


@pytest.mark.parametrize("tokens", [1, 17, 32, 45, 64])
def test_gate_up_matches_torch_for_any_number_of_tokens(gate_up, tokens):
    g = torch.Generator().manual_seed(tokens)
    wg, wu, _ = gate_up.args
    x = torch.randn(tokens, 256, generator=g)
    torch.testing.assert_close(pypto.jit(_gate_up)(wg, wu, x), F.silu(wg @ x.T) * (wu @ x.T), rtol=1e-4, atol=1e-4)


def test_a_store_between_two_loads_keeps_both():
    # An in-place update of x between the products: the second one reads what the store wrote.
    @pypto.frontend.jit
    def twice(w: pypto.Tensor((64, 64), pypto.DT_FP32), x: pypto.Tensor((64, 32), pypto.DT_FP32)):
        pypto.set_cube_tile_shapes([64, 64], [64, 64], [32, 32])
        pypto.set_vec_tile_shapes(64, 32)
        a = pypto.matmul(w, x)
        pypto.assemble(a, [0, 0], x)
        return pypto.matmul(w, x)

    w, x = torch.randn(64, 64) / 8, torch.randn(64, 32)
    want = w @ (w @ x)
    torch.testing.assert_close(twice(w, x.clone()), want, rtol=1e-4, atol=1e-4)
