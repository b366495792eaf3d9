"""compiled.pto() of jitted kernels parses back (pypto.pto.parse), prints the
same text, compiles and gives the same results; the CLI writes builder code
that rebuilds the same module (issue 5)."""

import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import pypto
import pypto.pto as pto

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "ir"))
from test_pto_parser import KERNELS, dynamic_fn, softmax_fn  # noqa: E402  (one set of test kernels)


def _random_args(name):
    rng = np.random.default_rng(7)
    return tuple(torch.from_numpy(rng.standard_normal(a.shape).astype(a.dtype)) for a in KERNELS[name][1]())


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_jit_pto_parses_back_compiles_and_matches(name):
    fn = KERNELS[name][0]
    args = _random_args(name)
    c = pypto.compile(pypto.jit(fn), *args)
    text = c.pto()
    module = pto.parse(text)
    assert module.to_pto() == text
    prog = pto.compile(module)
    assert prog.pto() == text  # planned again: the same buffers
    jit_args = [a.clone() for a in args]
    ref = c(*jit_args)
    refs = ref if isinstance(ref, tuple) else ((ref,) if ref is not None else ())
    outs = [torch.zeros_like(r) for r in refs]
    pto_args = [a.clone() for a in args]
    prog(*pto_args, *outs)
    assert len(prog.parameters) == len(args) + len(outs)
    for got, want in zip(outs, refs):
        torch.testing.assert_close(got, want)
    for got, want in zip(pto_args, jit_args):  # kernels that write into their arguments
        torch.testing.assert_close(got, want)


def test_parsed_module_runs_on_numpy_arrays():
    c = pypto.compile(pypto.jit(softmax_fn), torch.randn(64, 200))
    prog = pto.compile(pto.parse(c.pto()))
    x = np.random.default_rng(1).standard_normal((64, 200)).astype(np.float32)
    out = np.zeros_like(x)
    prog(x, out)
    np.testing.assert_allclose(out, torch.softmax(torch.from_numpy(x), -1).numpy(), atol=1e-5, rtol=1e-5)


def test_dynamic_dims_come_from_the_arrays():
    c = pypto.compile(pypto.jit(dynamic_fn), *_random_args("dynamic"))
    prog = pto.compile(pto.parse(c.pto()))
    assert len(prog.parameters) == 5  # x, y, z and the two outputs; M and z's rows come from the arrays
    for rows, zrows in ((1, 3), (16, 16), (30, 7)):
        x, y, z = torch.randn(rows, 48), torch.randn(rows, 48), torch.randn(zrows, 16)
        o1, o2 = torch.zeros(rows, 48), torch.zeros(zrows, 16)
        prog(x, y, z, o1, o2)
        torch.testing.assert_close(o1, torch.exp(x) * y - 0.5)
        torch.testing.assert_close(o2, torch.softmax(z, -1), atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match=r"dynamic dim 'M' is 5 in parameter 'x' but 4 in parameter 'y' \(dim 0\)"):
        prog(torch.randn(5, 48), torch.randn(4, 48), torch.randn(3, 16), torch.zeros(5, 48), torch.zeros(3, 16))


def _cli(*argv, cwd=None):
    return subprocess.run([sys.executable, "-m", "pypto.pto", *argv], capture_output=True, text=True, cwd=cwd,
                          env=dict(os.environ), timeout=300)


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_cli_parse_writes_builder_code_that_rebuilds_the_module(name, tmp_path):
    text = pypto.compile(pypto.jit(KERNELS[name][0]), *_random_args(name)).pto()
    (tmp_path / f"{name}.pto").write_text(text)
    out_dir = tmp_path / "gen"
    r = _cli("parse", str(tmp_path), "-o", str(out_dir))
    assert r.returncode == 0, r.stderr
    assert f"Generated: {out_dir / (name + '_builder.py')}" in r.stdout
    code = (out_dir / f"{name}_builder.py").read_text()
    assert "PTOFunctionBuilder(" in code and ".in_core()" in code
    rebuilt = subprocess.run([sys.executable, str(out_dir / f"{name}_builder.py")], capture_output=True, text=True,
                             timeout=300)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert rebuilt.stdout == pto.compile(text).pto() + "\n"


def test_cli_compile_prints_buffer_usage_and_rejects_bad_files(tmp_path):
    text = pypto.compile(pypto.jit(softmax_fn), *_random_args("softmax")).pto()
    good = tmp_path / "softmax.pto"
    good.write_text(text)
    r = _cli("compile", str(good))
    assert r.returncode == 0, r.stderr
    assert "InCore buffer usage:" in r.stdout and "@softmax_fn_fused_0:" in r.stdout and "bytes" in r.stdout
    bad = tmp_path / "bad.pto"
    bad.write_text(text.replace("trowmax", "trowmux", 1))
    r = _cli("compile", str(bad))
    assert r.returncode == 1
    line = next(i for i, l in enumerate(text.splitlines(), 1) if "trowmax" in l)
    assert f"bad.pto:{line}:" in r.stderr and "trowmux" in r.stderr


def test_parse_rejects_malformed_text_with_a_position():
    with pytest.raises(pypto.PtoSyntaxError) as e:
        pto.parse("// PTO Module: m\nfunc @f(%a: !pto.memref<gm,8x8,f32>) {\n  %t = alloc_tile : !pto.tile<8x8xf32>\n"
                  "  %t = tfoo %t : !pto.tile<8x8xf32>\n  return\n}\n")
    assert e.value.line == 4 and e.value.column > 1
    assert isinstance(e.value, SyntaxError)
