"""Every example runs and checks itself against torch. The scripts under models/ are benchmarks and
full-size runs; the model folders are checked by their own tests (python/tests/models)."""

import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").rglob("*.py"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[str(p.relative_to(ROOT)) for p in EXAMPLES])
def test_example_runs(path):
    out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=600, cwd=path.parent,
                         env=dict(os.environ))
    assert out.returncode == 0, out.stdout + out.stderr


def test_readme_demo_lists_every_instruction_kind_it_uses():
    # The demo prints the .pto opcodes of the compiled softmax: loads, the arithmetic and the store.
    path = ROOT / "examples" / "01_beginner" / "softmax.py"
    out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, timeout=600, cwd=path.parent,
                         env=dict(os.environ))
    assert out.returncode == 0, out.stdout + out.stderr
    line = next(ln for ln in out.stdout.splitlines() if ".pto instructions used:" in ln)
    used = set(line.split(":", 1)[1].replace(" ", "").split(","))
    assert {"tload", "trowmax", "texp", "trowsum", "trowexpanddiv", "tstore"} <= used, line
