"""PyPTO's option surface is accepted (issue 3, point 6)."""

import warnings

import pytest
import torch

import pypto


def _kernel(**jit_kwargs):
    @pypto.jit(**jit_kwargs)
    def f(x: pypto.Tensor((8, 16), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 8)
        return pypto.softmax(x, -1)

    return f


def test_jit_accepts_every_option_section_and_warns_once():
    pypto.reset_options()  # options set by other tests warn again
    with pytest.warns(pypto.OptionWarning, match="runtime_options.stitch_function_max_num"):
        f = _kernel(runtime_options={"stitch_function_max_num": 128, "run_mode": pypto.RunMode.NPU},
                    pass_options={"pg_lower_bound": 8, "fusion": True}, codegen_options={"soc_version": "x"},
                    host_options={"compile_timeout": 2}, debug_options={"runtime_debug_mode": 1},
                    verify_options={"enable_pass_verify": True})
    x = torch.randn(8, 16)
    torch.testing.assert_close(f(x), torch.softmax(x, -1), atol=1e-5, rtol=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the same options again: no second warning
        _kernel(runtime_options={"stitch_function_max_num": 64}, pass_options={"pg_lower_bound": 4})


def test_run_modes_both_run_on_cpu(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # SIM writes its swimlane under ./output
    for mode in (pypto.RunMode.NPU, pypto.RunMode.SIM):
        x = torch.randn(8, 16)
        torch.testing.assert_close(_kernel(run_mode=mode)(x), torch.softmax(x, -1), atol=1e-5, rtol=0)


def test_sim_run_mode_writes_each_calls_swimlane_where_pypto_does(tmp_path, monkeypatch):
    import json
    import os

    monkeypatch.chdir(tmp_path)
    f = _kernel(runtime_options={"run_mode": pypto.RunMode.SIM})
    x = torch.randn(8, 16)
    torch.testing.assert_close(f(x), torch.softmax(x, -1), atol=1e-5, rtol=0)
    f(x)
    runs = sorted((tmp_path / "output").iterdir())
    assert len(runs) == 2 and all(f"f_{os.getpid()}_" in r.name for r in runs)
    lane = json.loads((runs[0] / "CostModelSimulationOutput" / "merged_swimlane.json").read_text())
    tasks = [e for e in lane["traceEvents"] if e.get("cat") == "task"]
    assert tasks and lane["otherData"]["tasks"] == len(tasks) and all(e["dur"] >= 0 for e in tasks)
    _kernel(runtime_options={"run_mode": pypto.RunMode.NPU})(x)
    assert len(list((tmp_path / "output").iterdir())) == 2  # NPU mode writes none


def test_run_mode_has_upstreams_values_is_checked_and_recorded():
    # Upstream's RunMode is an IntEnum, NPU = 0 and SIM = 1; run_mode used to be dropped unchecked.
    assert (int(pypto.RunMode.NPU), int(pypto.RunMode.SIM)) == (0, 1)
    for mode in (None, 0, 1, pypto.RunMode.SIM):
        _kernel(runtime_options={"run_mode": mode})
        _kernel(run_mode=mode)
        with pypto.options(run_mode=mode):
            pass
    recorded = pypto.frontend.config.recorded_options()
    assert recorded["runtime_options.run_mode"] is pypto.RunMode.SIM
    assert recorded["jit.run_mode"] is pypto.RunMode.SIM
    for bad in ("npu", 2, True, 1.0):
        with pytest.raises(ValueError, match=rf"pypto.runtime_options: run_mode must be pypto.RunMode.NPU or "
                                             rf"pypto.RunMode.SIM \(or 0, 1\), found {bad!r}"):
            _kernel(runtime_options={"run_mode": bad})
        with pytest.raises(ValueError, match=r"pypto.jit: run_mode must be"):
            _kernel(run_mode=bad)
        with pytest.raises(ValueError, match=r"pypto.options: run_mode must be"):
            pypto.options(run_mode=bad)


def test_options_as_context_manager_and_decorator():
    x = torch.randn(8, 16)
    f = _kernel()
    with pypto.options(fusion=False):
        assert f.compile(x).stats()["incore_functions"] > 1
    assert f.compile(x).stats()["incore_functions"] == 1

    @pypto.options(pass_options={"fusion": False})
    @pypto.jit
    def g(x: pypto.Tensor((8, 16), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 8)
        return pypto.softmax(x, -1)

    assert g.compile(x).stats()["incore_functions"] > 1

    @pypto.jit
    @pypto.options(fusion=False)
    def h(x: pypto.Tensor((8, 16), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 8)
        return pypto.softmax(x, -1)

    assert h.compile(x).stats()["incore_functions"] > 1
    torch.testing.assert_close(h(x), torch.softmax(x, -1), atol=1e-5, rtol=0)


def test_set_pass_options_records_pyptos_keys_and_refuses_unknown_ones():
    try:
        with pytest.warns(pypto.OptionWarning, match="pass_options.vec_nbuffer_setting"):
            pypto.set_pass_options(vec_nbuffer_setting={-1: 2})
        assert pypto.get_pass_options()["vec_nbuffer_setting"] == {-1: 2}
        with pytest.raises(ValueError, match=r"pass_options: unknown pass option 'vec_nbufer_setting' \(known: .*"
                                             r"vec_nbuffer_setting"):
            pypto.set_pass_options(vec_nbufer_setting={-1: 2})
    finally:
        pypto.reset_options()
