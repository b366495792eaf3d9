"""Each pass on a small program: the IR after it (compiled.dump("passes"))
against the structure it must have, compared with the IR before it."""

import re

import pytest
import torch

import pypto


def _softmax(x: pypto.Tensor((64, 128), pypto.DT_FP32)):
    pypto.set_vec_tile_shapes(32, 32)
    return pypto.softmax(x, -1)


def _passes(fn, *args, **opts):
    text = pypto.compile(pypto.jit(fn, pass_options=opts or None), *args).dump("passes")
    out, name = {}, None
    for line in text.splitlines():
        m = re.match(r"-- pass (\w+) \(([\d.]+) ms, (\w+)", line)
        if m:
            name = m.group(1)
            out[name] = {"state": m.group(3), "ir": []}
        elif name:
            out[name]["ir"].append(line)
    return {k: {"state": v["state"], "ir": "\n".join(v["ir"])} for k, v in out.items()}


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
    assert ir.count("// parallel dim=0 tile=32") == 5        # every op walks the 2 row blocks in parallel


def test_fuse_blocks_groups_the_chain_over_the_row_grid(softmax_passes):
    ir = softmax_passes["fuse_blocks"]["ir"]
    assert ir.count("// Function Type: InCore") == 1
    assert "// Fused: amax_0, sub_1, exp_2, sum_3, div_4" in ir
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
    planned = int(re.search(r"// Buffer bytes: (\d+)", ir).group(1))
    before = int(re.search(r"// Buffer bytes: (\d+)", softmax_passes["rematerialize"]["ir"] or
                           softmax_passes["forward_tiles"]["ir"]).group(1))
    assert before == 0 < planned  # bytes are only known after planning


def test_build_orchestration_wraps_the_call_in_the_grid_loop(softmax_passes):
    ir = softmax_passes["build_orchestration"]["ir"]
    assert ir.startswith("execution_graph @_softmax")
    assert re.search(r"FOR %g0:idx, 0:idx, 2:idx, 1:idx\s*// parallel dim=0 tile=32\n\s+CALL @", ir)


def test_disabled_pass_is_marked_skipped():
    p = _passes(_softmax, torch.randn(64, 128), disable_passes=["fuse_loops"])
    assert p["fuse_loops"]["state"] == "skipped"
