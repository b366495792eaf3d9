"""PyPTO's option functions: every setter stores what its getter returns, unknown keys raise,
the options that mean something on a CPU act."""

import os
import warnings

import pytest
import torch

import pypto


@pytest.fixture(autouse=True)
def _defaults():
    pypto.reset_options()
    yield
    pypto.reset_options()


def _kernel(**jit_kwargs):
    @pypto.jit(**jit_kwargs)
    def f(x: pypto.Tensor((8, 16), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(8, 8)
        return pypto.exp(x) * 2

    return f


@pytest.mark.parametrize("section, key, value", [
    ("host", "compile_timeout", 30), ("codegen", "soc_version", "cpu"), ("verify", "pass_verify_save_tensor", True),
    ("debug", "runtime_debug_mode", 1), ("runtime", "stitch_function_max_num", 64),
])
def test_each_setter_stores_what_its_getter_returns(section, key, value):
    setter, getter = getattr(pypto, f"set_{section}_options"), getattr(pypto, f"get_{section}_options")
    before = getter()
    assert key in before and before[key] != value
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pypto.OptionWarning)
        setter(**{key: value})
    after = getter()
    assert after[key] == value and {k: v for k, v in after.items() if k != key} == \
        {k: v for k, v in before.items() if k != key}
    assert f"{key}: {value!r}" in pypto.get_options_tree()
    pypto.reset_options()
    assert getter() == before


def test_compile_stage_takes_the_enum_and_stores_its_value():
    assert [s.value for s in pypto.CompStage] == list(range(6))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", pypto.OptionWarning)
        pypto.set_host_options(compile_stage=pypto.CompStage.TILE_GRAPH)
        assert pypto.get_host_options()["compile_stage"] == 2
        pypto.set_options(host_options={"compile_stage": pypto.CompStage.CODEGEN_BINARY})
    assert pypto.get_host_options()["compile_stage"] == 5


@pytest.mark.parametrize("section", ["host", "codegen", "verify", "debug", "runtime"])
def test_unknown_keys_raise_naming_the_key_and_the_known_ones(section):
    setter = getattr(pypto, f"set_{section}_options")
    with pytest.raises(ValueError, match=rf"pypto.set_{section}_options: unknown {section} option 'no_such_key' "
                                         rf"\(known: "):
        setter(no_such_key=1)
    with pytest.raises(ValueError, match=rf"pypto.jit {section}_options: unknown {section} option 'no_such_key'"):
        _kernel(**{f"{section}_options": {"no_such_key": 1}})


def test_unknown_jit_option_and_global_keys_raise():
    with pytest.raises(TypeError, match=r"pypto.jit: unknown option 'pass_option'"):
        _kernel(pass_option={"fusion": False})
    with pytest.raises(ValueError, match=r"pypto.set_global_config: unknown global option 'tensor_print.digits'"):
        pypto.set_global_config("tensor_print.digits", 3)
    pypto.set_print_options(precision=6)
    assert pypto.get_global_config("tensor_print.precision") == 6
    with pytest.raises(ValueError, match=r"set_print_options: precision must be a non-negative int, found -1"):
        pypto.set_print_options(precision=-1)


def test_enable_pass_verify_and_set_options_act():
    x = torch.randn(8, 16)
    pypto.set_verify_options(enable_pass_verify=True)
    assert pypto.get_verify_options()["enable_pass_verify"] is True
    torch.testing.assert_close(_kernel()(x), torch.exp(x) * 2)
    pypto.set_options(pass_options={"fusion": False}, operation_options={"combine_axis": False})
    assert _kernel().compile(x).stats()["incore_functions"] == 2
    assert pypto.experimental.get_operation_options() == {"combine_axis": False}
    pypto.reset_options()
    assert _kernel().compile(x).stats()["incore_functions"] == 1


def test_debug_options_write_the_pass_graphs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    x = torch.randn(8, 16)
    pypto.set_debug_options(compile_debug_mode=1)
    torch.testing.assert_close(_kernel()(x), torch.exp(x) * 2)
    (run,) = (tmp_path / "output").iterdir()
    files = sorted(p.name for p in (run / "pass_graphs").iterdir())
    passes = [f for f in files if f[:2].isdigit()]
    assert len(passes) == len(pypto._C.pass_names()) and "tensor_graph.txt" in files and "program.pto" in files
    assert "tile_graph @f" in (run / "pass_graphs" / passes[2]).read_text()  # expand_tiles' graph
    pypto.reset_options()

    with pytest.warns(pypto.OptionWarning, match=r"'dump_pass_graph' names no pass: NoSuchPass"):
        f = _kernel(debug_options={"dump_pass_graph": ["expand_tiles", "NoSuchPass"]})
        f(x)
    runs = sorted((tmp_path / "output").iterdir(), key=os.path.getmtime)
    dumped = [p.name for p in (runs[-1] / "pass_graphs").iterdir() if p.name[:2].isdigit()]
    assert dumped == ["02_expand_tiles.txt"]
    with pytest.raises(ValueError, match=r"debug option 'compile_debug_mode' must be 0, 1 or 2, found 7"):
        pypto.set_debug_options(compile_debug_mode=7)


def test_pass_config_dump_graph_acts_and_is_returned(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    key = pypto.PassConfigKey.KEY_DUMP_GRAPH
    assert pypto.get_pass_config("PVC2_OOO", "fuse_loops", key, False) is False
    pypto.set_pass_config("PVC2_OOO", "fuse_loops", key, True)
    assert pypto.get_pass_config("PVC2_OOO", "fuse_loops", key, False) is True
    assert pypto.get_pass_configs("PVC2_OOO", "fuse_loops").dumpGraph is True
    _kernel()(torch.randn(8, 16))
    (run,) = (tmp_path / "output").iterdir()
    assert [p.name for p in (run / "pass_graphs").iterdir() if p.name[:2].isdigit()] == ["05_fuse_loops.txt"]
    with pytest.warns(pypto.OptionWarning, match=r"'ExpandFunction' is not a pass of pypto"):
        pypto.set_pass_config("PVC2_OOO", "ExpandFunction", key, True)
    assert pypto.get_pass_default_config(key, False) is False
    pypto.set_pass_default_config(key, True)
    assert pypto.get_pass_config("PVC2_OOO", "expand_tiles", key, False) is True
    with pytest.raises(ValueError, match=r"key must be a member of pypto.PassConfigKey, found 'dump'"):
        pypto.set_pass_config("PVC2_OOO", "fuse_loops", "dump", True)
    with pytest.raises(TypeError, match=r"pypto.set_pass_default_config: value must be a bool, found int 1"):
        pypto.set_pass_default_config(key, 1)


def test_logging_functions(caplog):
    assert pypto.get_log_level() == pypto.LogLevel.WARN and int(pypto.LogLevel.EVENT) == 5
    with caplog.at_level("DEBUG", logger="pypto"):
        pypto.set_log_level(pypto.LogLevel.INFO)
        pypto.log_debug("hidden")
        pypto.log_info("shown info")
        pypto.log_event("an event")
    assert [r.getMessage() for r in caplog.records] == ["shown info", "an event"]
    pypto.set_log_level(pypto.LogLevel.WARN)
    pypto.check(True, "fine")
    with pytest.raises(ValueError, match="^bad value$"):
        pypto.check(False, "bad value")
    with pytest.raises(pypto.InternalError, match="broken"):
        pypto.internal_check(False, "broken")
    with pytest.raises(TypeError, match="wrong type"):
        pypto.raise_error("TypeError", "wrong type")
    with pytest.raises(ValueError, match=r"pypto.set_log_level: level must be a pypto.LogLevel, found 9"):
        pypto.set_log_level(9)
    assert pypto.logging.LogLevel is pypto.LogLevel


def test_golden_data_is_compared_after_the_next_call():
    @pypto.jit(verify_options={"enable_pass_verify": True})
    def f(x: pypto.Tensor((4, 8), pypto.DT_FP32), out: pypto.Tensor((4, 8), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 8)
        out[:] = pypto.exp(x)

    x, out = torch.randn(4, 8), torch.zeros(4, 8)
    f(x, out)  # compiled and cached: the next calls may take the repeated-call path
    pypto.set_verify_golden_data(goldens=[None, torch.exp(x)])
    with warnings.catch_warnings():
        warnings.simplefilter("error", pypto.VerifyWarning)
        f(x, out)  # matches: no warning
    wrong = torch.exp(x)
    wrong[1, 2] += 1.0
    pypto.set_verify_golden_data([x, out], [None, wrong])
    with pytest.warns(pypto.VerifyWarning, match=r"f: verify: parameter 'out' differs from its golden in 1 of 32 "
                                                 r"elements \(max abs error 1; atol 0.001, rtol 0.001\)"):
        f(x, out)
    with warnings.catch_warnings():
        warnings.simplefilter("error", pypto.VerifyWarning)
        f(x, out)  # goldens are used once
    with pytest.raises(TypeError, match=r"goldens\[0\] must be None, a torch tensor"):
        pypto.set_verify_golden_data(goldens=["x"])


@pytest.mark.filterwarnings("ignore::pypto.OptionWarning")
def test_current_scope_is_a_snapshot_of_the_options_in_force():
    pypto.set_host_options(compile_timeout=45)
    pypto.set_global_config("tensor_print.precision", 6)
    scope = pypto.get_current_scope()
    assert isinstance(scope, pypto.ConfigScope)
    assert scope.get_host_options()["compile_timeout"] == 45
    assert scope.get_options_prefix("host.compile_timeout") == 45
    assert scope.get_options_prefix("global.tensor_print.precision") == 6
    assert scope.has("debug.compile_debug_mode") and not scope.has("debug.nothing")
    assert scope.get_all()["verify.enable_pass_verify"] == pypto.get_verify_options()["enable_pass_verify"]
    with pytest.raises(KeyError, match=r"option not found: 'host.nothing'"):
        scope.get_options_prefix("host.nothing")
    pypto.set_host_options(compile_timeout=60)
    assert scope.get_host_options()["compile_timeout"] == 45  # a snapshot
    assert pypto.get_current_scope().get_host_options()["compile_timeout"] == 60
    assert "host.compile_timeout: 60" in repr(pypto.get_current_scope())

    seen = {}

    @pypto.jit
    def f(x: pypto.Tensor((8, 16), pypto.DT_FP32)):
        pypto.set_vec_tile_shapes(4, 8)
        pypto.set_cube_tile_shapes([16, 16], [32, 32], [16, 16])
        s = pypto.get_current_scope()
        seen["vec"], seen["cube"] = s.get_vec_tile_shapes(), s.get_cube_tile_shapes()
        return x + 1

    torch.testing.assert_close(f(torch.ones(8, 16)), torch.full((8, 16), 2.0))
    assert seen["vec"] == [4, 8]
    assert seen["cube"] == ([16, 16], [32, 32], [16, 16], False)


def test_semantic_labels_are_checked_and_warn_once_as_without_effect():
    with pytest.warns(pypto.OptionWarning, match=r"'operation.semantic_label' has no effect on the CPU backend"):
        pypto.set_semantic_label("attention")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pypto.set_semantic_label("ffn")  # once
    with pytest.raises(ValueError, match=r"label 'func12_3' has the form of a function order name"):
        pypto.set_semantic_label("func12_3")
    with pytest.raises(TypeError, match=r"label must be a str, found int 3"):
        pypto.set_semantic_label(3)
